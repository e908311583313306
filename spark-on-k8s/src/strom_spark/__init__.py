"""Strom's Spark side: the sample-event generator, the connector jars' location, the
spark-submit launcher and the container entrypoint of the Spark image. The pipelines
themselves are the application files in spark-on-k8s/jobs/."""

# The Kubernetes test tier (e2e/k8s/README.md). Included by the top Makefile, which
# defines BIN (.venv/bin) and the install-python target.
#   make k8s-tools   build etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
#                    kubectl from Go modules into ~/.cache/strom/k8s/<version> (skipped when there)
#   make helm        build Helm (for charts/strom's tests) from Go modules (helm/go.mod) into
#                    ~/.cache/strom/helm/<version> (skipped when there)
#   make e2e-k8s     build them if needed, then run e2e/k8s against a control plane of our own
.PHONY: k8s-tools helm e2e-k8s

k8s-tools:
	bash e2e/k8s/build.sh

helm:
	bash e2e/k8s/helm.sh

e2e-k8s: install-python k8s-tools helm
	$(BIN)/pytest e2e/k8s $(PYTEST_ARGS)

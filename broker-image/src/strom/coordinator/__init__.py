"""Coordinators: producer id allocation today; consumer groups and transactions later."""

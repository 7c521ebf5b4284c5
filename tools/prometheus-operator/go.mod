// The Prometheus Operator's CRDs (example/prometheus-operator-crd at v0.85.0), which the real
// tier applies to the loopback fleet to deploy `monitoring.prometheusOperator` against the
// operator's real schemas (tests/helpers/monitoring.py, operator_crds). Nothing is built from
// it: a module of its own so that the operator's build list leaves the tools' alone, and
// `go mod download` checks the module against this go.sum.
module github.com/multikueue-fleet/tools/prometheus-operator

go 1.26.0

require github.com/prometheus-operator/prometheus-operator v0.85.0

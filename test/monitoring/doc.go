// Package monitoring tests deploy/monitoring: the PrometheusRule's alerts
// with promtool (check rules, and test rules against testdata/rules_test.yaml,
// every alert firing and not firing), the PodMonitors, PrometheusRule and
// dashboard ConfigMap applied server-side against the prometheus-operator
// CRDs (read from the Go module cache, see operatorVersion), the PodMonitors'
// selectors and ports against the shipped Deployments, and every metric that
// the rules and the dashboard name against the /metrics of a running coredns
// whose Corefile loads every plugin they come from.
package monitoring

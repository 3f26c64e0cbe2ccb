module deploybox/prometheusoperator

go 1.26.6

require github.com/prometheus-operator/prometheus-operator v0.85.0

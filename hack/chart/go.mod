// hack/chart writes charts/operador-promociones from manifiestos/, and its
// tests check the chart with Helm. Its own module, so the operator's go.mod
// stays small.
module operador-promociones/hack/chart

go 1.26.0

require sigs.k8s.io/yaml v1.6.0

require go.yaml.in/yaml/v2 v2.4.2 // indirect

#!/usr/bin/env bash
# hack/undeploy.sh [KUBECTL] (make undeploy): delete the operator, and nothing
# of the API: the CRD, its guard, the users' roles, the Promociones and their
# shops stay, and the shops keep serving.
set -euo pipefail
kubectl=${1:-kubectl}
hack=$(cd "$(dirname "$0")" && pwd)

# Its Pods first, and gone, so that the leader may still release its Lease
# on the way out.
"$kubectl" delete --ignore-not-found --cascade=foreground -n default deployment/operador-promociones
PART=operator "$hack/installer.sh" none - "$kubectl" | "$kubectl" delete --ignore-not-found -f -
# An install confined to namespaces (make deploy NAMESPACES=...) bound the
# operator's ClusterRole in each; wherever they are, they go too.
"$kubectl" get rolebindings --all-namespaces --field-selector metadata.name=operador-promociones -o \
	jsonpath='{range .items[?(@.roleRef.name=="operador-promociones")]}{.metadata.namespace}{"\n"}{end}' |
	while read -r ns; do "$kubectl" delete rolebinding operador-promociones -n "$ns"; done

#!/usr/bin/env bash
# hack/deploy.sh INSTALLER [KUBECTL] (make deploy): apply INSTALLER
# (dist/install.yaml), which runs the operator in its own namespace,
# operador-promociones-system. NAMESPACES, as hack/installer.sh reads it.
#
# An operator running in default (the lesson's make dev, or an install made
# before the operator had a namespace of its own) moves: it is stopped first,
# its Pods gone and its Lease released, so that two leaders never run at
# once; then the new one starts; then its objects in default are removed, and
# with them the way past default's editors (docs/operating.md, Moving out of
# default). The Promociones and their shops stay as they are, serving, and the
# new operator takes them back without a write.
set -euo pipefail
installer=$1 kubectl=${2:-kubectl}
hack=$(cd "$(dirname "$0")" && pwd)
source "$hack/layout.sh"

moving=
if [ -n "$("$kubectl" get deployment operador-promociones -n default --ignore-not-found -o name)" ]; then
	echo "The operator runs in default: it stops there first, and moves to operador-promociones-system."
	moving=yes
	stop_operator default
fi
"$kubectl" apply -f "$installer"
# Confined: a grant to every namespace, left by an earlier deploy, would undo it.
[ -z "${NAMESPACES:-}" ] || "$kubectl" delete --ignore-not-found clusterrolebinding operador-promociones
# What the lesson's layout left in default goes, whether or not it ran there:
# its ServiceAccount's name, in default, is the way past default's editors.
left=$(remove_namespaced default | grep -v -e ' not found' || true)
if [ -n "$moving" ]; then
	echo "Moved: nothing of the operator is left in default."
elif [ -n "$left" ]; then
	echo "Removed what an earlier install left in default:"
	echo "$left" | sed 's/^/  /'
fi

#!/usr/bin/env bash
# hack/uninstall.sh [KUBECTL] (make uninstall): delete the Promocion API, that
# is the CRD, and with it every Promocion and, through the garbage collector,
# every shop; the CRD's guard; and the users' roles. It first says what will
# go, then asks. CONFIRM=yes answers yes for a script; with neither a terminal
# to ask nor CONFIRM=yes, it deletes nothing.
set -euo pipefail
kubectl=${1:-kubectl}
hack=$(cd "$(dirname "$0")" && pwd)
crd=promociones.tienda.example.com

if [ -n "$("$kubectl" get crd "$crd" --ignore-not-found -o name)" ]; then
	# Namespace and count, a line each: a cluster may hold thousands.
	mapfile -t namespaces < <("$kubectl" get promociones.tienda.example.com --all-namespaces --no-headers \
		-o custom-columns=NS:.metadata.namespace | sort | uniq -c | awk '{print $2 " " $1}')
	total=0
	for line in "${namespaces[@]}"; do total=$((total + ${line##* })); done
	echo "make uninstall deletes the Promocion CRD, and with it:"
	if [ "$total" = 1 ]; then echo "  1 Promocion, in:"; else echo "  $total Promociones${namespaces[0]:+, in:}"; fi
	for line in "${namespaces[@]:0:20}"; do printf '    %-40s %s\n' "${line% *}" "${line##* }"; done
	[ ${#namespaces[@]} -le 20 ] || echo "    and $((${#namespaces[@]} - 20)) namespaces more"
	echo "  their Deployments, Services and ConfigMaps, which the garbage collector deletes:"
	echo "    every shop stops serving"
	echo "  the CRD's guard and the roles promocion-editor and promocion-viewer"
	echo "To remove only the operator and keep all of this: make undeploy."
	for ns in operador-promociones-system default; do
		if [ -n "$("$kubectl" get deployment operador-promociones -n "$ns" --ignore-not-found -o name)" ]; then
			echo "(The operator still runs in $ns: without its CRD it logs errors until make undeploy removes it.)"
		fi
	done
	if [ "${CONFIRM:-}" != yes ]; then
		if [ ! -t 0 ]; then
			echo "Nothing deleted: there is no terminal to ask. Run make uninstall CONFIRM=yes to delete it all." >&2
			exit 1
		fi
		read -r -p "Type yes to delete it all: " answer
		if [ "$answer" != yes ]; then
			echo "Nothing deleted."
			exit 1
		fi
	fi
	# The guard (manifiestos/protect-crd.yaml) lets through only a CRD so marked.
	"$kubectl" annotate crd "$crd" tienda.example.com/permitir-borrado=true --overwrite >/dev/null
else
	echo "The Promocion CRD is not installed: no Promocion to delete. Its guard and the users' roles go, if they are there."
fi
if ! PART=api "$hack/installer.sh" none - "$kubectl" | "$kubectl" delete --ignore-not-found -f -; then
	# Guarded again, whatever is left.
	"$kubectl" annotate crd "$crd" tienda.example.com/permitir-borrado- >/dev/null 2>&1 || true
	exit 1
fi

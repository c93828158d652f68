#!/usr/bin/env bash
# Renders deploy/k8s/shoal.yaml from the Helm chart (deploy/k8s/values.yaml), for users without
# Helm. The tests check that the committed file is what this prints.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
helm=${HELM:-helm}
{
  echo "# Shoal on Kubernetes without Helm: kubectl apply -f models-pvc.yaml -f shoal.yaml"
  echo "# Rendered from deploy/helm/shoal with deploy/k8s/values.yaml by deploy/k8s/render.sh: edit those, not this."
  "$helm" template shoal "$here/../helm/shoal" -f "$here/values.yaml" --kube-version 1.33.0 | grep -v '^# Source: '
}

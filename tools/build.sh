#!/usr/bin/env bash
# Builds the pinned tools of issue 8 from their Go modules, one wrapper module per family
# (tools/<family>/go.mod + go.sum hold every version; nothing here names one).
#   tools/build.sh                build every family that is not built yet
#   tools/build.sh --print-path   print the bin folders, one a line (for PATH); builds nothing
#   TOOLS_FAMILIES="etcd pulumi"  limit either to some families
# Each family goes to $CACHE/<family>-<sha256 of its go.mod+go.sum, 16 hex>/bin, so a changed pin
# builds into a new folder and an unchanged one is skipped. The pulumi family also builds the
# project's own Python language host (module tools/pulumi-language-python), whose files are in its
# key too. Binaries are built with -trimpath, CGO_ENABLED=0 (nvidia-ctk alone needs cgo) and the Go on
# PATH (GOTOOLCHAIN=local: no toolchain download).
set -euo pipefail
cd "$(dirname "$0")"

export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/k8s-node-pools/tools
FAMILIES=${TOOLS_FAMILIES:-containerd etcd images kubernetes kubelet-config-check kwok nvidia-container-toolkit pulumi pulumi-kubernetes volcano}

# What a family's build reads besides its go.mod and go.sum (in its cache key too).
extra_inputs() {
  case "$1" in
    pulumi) echo pulumi-language-python/go.mod pulumi-language-python/go.sum pulumi-language-python/main.go ;;
    kubelet-config-check) echo kubelet-config-check/main.go ;;
    kwok) echo kwok/stages.txt kwok/stages.sed ;;
    images) echo images/pause/main.go images/probe/main.go ;;
  esac
}

family_dir() {
  local key
  # shellcheck disable=SC2046 # the extra inputs are plain relative paths
  key=$(cat "$1/go.mod" "$1/go.sum" $(extra_inputs "$1") | sha256sum | cut -c1-16)
  echo "$CACHE/$1-$key"
}

if [ "${1:-}" = "--print-path" ]; then
  for family in $FAMILIES; do
    echo "$(family_dir "$family")/bin"
  done
  exit 0
elif [ -n "${1:-}" ]; then
  sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi

command -v go >/dev/null || { echo "tools: needs Go (1.26) on PATH" >&2; exit 2; }

version_of() { (cd "$family" && go list -m -f '{{.Version}}' "$1"); }
dir_of() { (cd "$family" && go mod download -json "$1" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p'); }

# Each build_<family> writes its binaries into $out (an empty folder) from the wrapper module.
build_containerd() {
  local v mod=github.com/containerd/containerd/v2 cmd
  v=$(version_of $mod)
  # The tags leave out the snapshotters that need C headers (btrfs) or host tools the sandbox lacks; overlayfs
  # and native stay, as in upstream's static release.
  for cmd in containerd containerd-shim-runc-v2 ctr; do
    echo "tools: containerd: $cmd from $mod $v" >&2
    (cd containerd && go build -trimpath -tags "no_btrfs no_devmapper no_zfs" \
      -ldflags "-X $mod/version.Version=$v -X $mod/version.Revision=$v" \
      -o "$out/$cmd" "$mod/cmd/$cmd")
  done
}

build_etcd() {
  local v
  v=$(version_of go.etcd.io/etcd/server/v3)
  echo "tools: etcd: go.etcd.io/etcd/server/v3 $v" >&2
  (cd etcd && go build -trimpath -o "$out/etcd" go.etcd.io/etcd/server/v3)
}

# The programs of the sandbox's container images (tests/hosts/ociimage.py packs them): static, stripped.
build_images() {
  local cmd
  for cmd in pause probe; do
    echo "tools: images: $cmd (tools/images/$cmd)" >&2
    (cd images && go build -trimpath -ldflags "-s -w" -o "$out/$cmd" "./$cmd")
  done
}

build_kubernetes() {
  local v t minor ldflags="" pkg key
  v=$(version_of k8s.io/kubernetes)
  t=$(cd kubernetes && go list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes)
  minor=${v#v*.}
  minor=${minor%%.*}
  # What hack/lib/version.sh stamps, in both places that read it; the provider reads /version.
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    for key in gitVersion=$v gitMajor=1 gitMinor=$minor gitTreeState=archive buildDate=$t; do
      ldflags+=" -X $pkg.$key"
    done
  done
  for pkg in kube-apiserver kube-controller-manager kube-scheduler kubelet; do
    echo "tools: kubernetes: $pkg from k8s.io/kubernetes $v" >&2
    (cd kubernetes && go build -trimpath -ldflags "$ldflags" -o "$out/$pkg" "k8s.io/kubernetes/cmd/$pkg")
  done
}

build_kwok() {
  local v
  v=$(version_of sigs.k8s.io/kwok)
  echo "tools: kwok: sigs.k8s.io/kwok/cmd/kwok $v" >&2
  (cd kwok && go build -trimpath -ldflags "-X sigs.k8s.io/kwok/pkg/consts.Version=${v#v}" \
    -o "$out/kwok" sigs.k8s.io/kwok/cmd/kwok)
  # Its configuration: the upstream stages tools/kwok/stages.txt names, from the same module version, with
  # tools/kwok/stages.sed's one change.
  local dir stage
  dir=$(dir_of "sigs.k8s.io/kwok@$v")
  while read -r stage; do
    case "$stage" in '' | '#'*) continue ;; esac
    echo "---"
    cat "$dir/$stage"
  done <kwok/stages.txt | sed -f kwok/stages.sed >"$out/kwok-stages.yaml"
}

build_kubelet-config-check() {
  echo "tools: kubelet-config-check: the kubelet's config validation from k8s.io/kubernetes $(version_of k8s.io/kubernetes)" >&2
  (cd kubelet-config-check && go build -trimpath -o "$out/kubelet-config-check" .)
}

build_nvidia-container-toolkit() {
  local v
  v=$(version_of github.com/NVIDIA/nvidia-container-toolkit)
  command -v gcc >/dev/null || { echo "tools: nvidia-ctk is built with cgo: install gcc (apt-get install gcc)" >&2; return 1; }
  echo "tools: nvidia-container-toolkit: nvidia-ctk $v" >&2
  (cd nvidia-container-toolkit && CGO_ENABLED=1 go build -trimpath \
    -ldflags "-X github.com/NVIDIA/nvidia-container-toolkit/internal/info.version=${v#v}" \
    -o "$out/nvidia-ctk" github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-ctk)
}

build_pulumi() {
  local v sdk
  v=$(version_of github.com/pulumi/pulumi/pkg/v3)
  echo "tools: pulumi: github.com/pulumi/pulumi/pkg/v3/cmd/pulumi $v" >&2
  (cd pulumi && go build -trimpath -tags osusergo,grpcnotrace \
    -ldflags "-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$v" \
    -o "$out/pulumi" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi)
  # Pulumi's Python language host is not served by the proxy (see tools/pulumi/go.mod); the
  # project's own (tools/pulumi-language-python, over the same sdk/v3) goes beside pulumi, where the
  # CLI looks for bundled hosts: on PATH but elsewhere, every command would warn about it.
  sdk=$(cd pulumi-language-python && go list -m -f '{{.Version}}' github.com/pulumi/pulumi/sdk/v3)
  echo "tools: pulumi: pulumi-language-python (tools/pulumi-language-python over sdk/v3 $sdk)" >&2
  (cd pulumi-language-python && go build -trimpath \
    -ldflags "-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$sdk" \
    -o "$out/pulumi-language-python" .)
  # The host runs this script from its own folder; it ships in the sdk/v3 module.
  sdk=$(dir_of "github.com/pulumi/pulumi/sdk/v3@$sdk")
  install -m 0644 "$sdk/python/cmd/pulumi-language-python-exec" "$out/pulumi-language-python-exec"
}

build_pulumi-kubernetes() {
  local mod dir release cmd gen
  mod=github.com/pulumi/pulumi-kubernetes/provider/v4
  release=$(sed -n 's#^// provider-release: \(v[0-9.]*\)$#\1#p' pulumi-kubernetes/go.mod)
  [ -n "$release" ] || { echo "tools: pulumi-kubernetes/go.mod has no '// provider-release:' line" >&2; return 1; }
  echo "tools: pulumi-kubernetes: $mod $(version_of $mod) (release $release)" >&2
  dir=$(dir_of "$mod@$(version_of $mod)")
  cmd=$dir/cmd/pulumi-resource-kubernetes
  # main.go embeds two files that upstream generates (go generate) and does not ship: the schema
  # with its version set, and the Terraform mapping. The go command refuses overlays inside the
  # module cache, so the package is laid out virtually in the wrapper module (an overlay of
  # upstream's main.go plus the generated files); nothing is written to the work tree.
  gen=$(mktemp -d)
  trap 'rm -rf "$gen"' RETURN
  python3 - "$cmd" "$gen" "${release#v}" "$PWD/pulumi-kubernetes/pulumi-resource-kubernetes" <<'PY'
import json, sys, pathlib
cmd, gen, version, pkg = map(pathlib.Path, sys.argv[1:5])
schema = json.loads((cmd / "schema.json").read_text())
schema["version"] = str(version)
(gen / "schema-embed.json").write_text(json.dumps(schema, separators=(",", ":")))
mapping = json.loads((cmd / "terraform-mapping.json").read_text())
(gen / "terraform-mapping-embed.json").write_text(json.dumps(mapping, separators=(",", ":")))
replace = {str(pkg / "main.go"): str(cmd / "main.go")}
replace.update({str(pkg / n): str(gen / n) for n in ("schema-embed.json", "terraform-mapping-embed.json")})
(gen / "overlay.json").write_text(json.dumps({"Replace": replace}))
PY
  (cd pulumi-kubernetes && go build -trimpath -overlay "$gen/overlay.json" \
    -ldflags "-X $mod/pkg/version.Version=${release#v}" \
    -o "$out/pulumi-resource-kubernetes" ./pulumi-resource-kubernetes)
}

build_volcano() {
  local mod=volcano.sh/volcano v cmd
  v=$(version_of $mod)
  for cmd in scheduler controller-manager; do
    echo "tools: volcano: vc-$cmd from $mod $v" >&2
    (cd volcano && go build -trimpath -ldflags "-X $mod/pkg/version.Version=$v" -o "$out/vc-$cmd" "$mod/cmd/$cmd")
  done
  # The CRDs the chart installs, from the same module version: the scheduler waits for every informer it
  # starts (HyperNodes and Numatopologies too) before its first session.
  mkdir -p "$out/crd"
  install -m 0644 "$(dir_of "$mod@$v")"/installer/helm/chart/volcano/crd/bases/*.yaml "$out/crd/"
}

for family in $FAMILIES; do
  [ -f "$family/go.mod" ] || { echo "tools: no such family: $family" >&2; exit 2; }
  dir=$(family_dir "$family")
  if [ -f "$dir/.complete" ]; then
    echo "tools: $family: up to date in $dir" >&2
    continue
  fi
  out=$dir.partial/bin
  rm -rf "$dir.partial"
  mkdir -p "$out"
  start=$SECONDS
  if ! "build_$family"; then
    echo "tools: building $family FAILED after $((SECONDS - start)) s (nothing cached for it)" >&2
    rm -rf "$dir.partial"
    exit 1
  fi
  (cd "$out" && ls -1) >"$dir.partial/.complete"
  rm -rf "$dir"
  mv "$dir.partial" "$dir"
  echo "tools: $family: built in $((SECONDS - start)) s into $dir/bin" >&2
done

#!/usr/bin/env bash
# Disposable sandbox hosts for the host layer: systemd containers (rootful podman, slirp4netns) and
# an emulated VM (qemu TCG, a real Debian kernel) for the kernel state containers cannot prove.
# Every file it writes lives under the checkout's .state/; it never changes this machine's kernel
# settings (no sysctl, no modprobe, no bridge network). Measured figures: tests/hosts/README.md.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
STATE=${SANDBOX_STATE:-$ROOT/.state}
PODMAN_DIR=$STATE/podman
HOSTS_DIR=$STATE/hosts
# The host image's rootfs tar is kept outside the checkout, keyed by its recipe, so other checkouts
# (and a later `down` + `up` after a storage reset) import it instead of running mmdebstrap again.
IMAGES_DIR=${SANDBOX_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/k8s-node-pools/sandbox}
VM_DIR=$STATE/vm
# The sandbox's containerd.io apt repository (tests/hosts/aptrepo.py), mounted read-only into every container host.
APT_DIR=$STATE/apt
APT_SERVED=/srv/k8s-node-pools-apt
SUITE=${SANDBOX_SUITE:-bookworm}
MIRROR=${SANDBOX_MIRROR:-http://deb.debian.org/debian}
SECURITY_MIRROR=${SANDBOX_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
LABEL=k8s-node-pools.sandbox
IMAGE_REPO=localhost/k8s-node-pools-host
VM_MEMORY=${SANDBOX_VM_MEMORY:-2048}
VM_BOOT_TIMEOUT=${SANDBOX_VM_BOOT_TIMEOUT:-300}
# A container host's boot is seconds, but a loaded 2-core machine has been seen to take over 30 s.
HOST_BOOT_TIMEOUT=${SANDBOX_HOST_BOOT_TIMEOUT:-120}
# Software emulation: KVM is not usable on this machine kind (README.md, "What fails").
VM_ACCEL=${SANDBOX_VM_ACCEL:-tcg,thread=multi}
VM_CPU=${SANDBOX_VM_CPU:-max}
# What every host needs for Ansible, testinfra and systemd (tests in ../shared/notes/test-hosts.md).
HOST_PACKAGES=python3,python3-apt,systemd,systemd-sysv,dbus,openssh-server,iproute2,procps,kmod,pciutils,sudo,ca-certificates
# The VM also boots a kernel of its own, from its own rootfs. What the roles install there is baked in
# (chrony for base, xfsprogs for local_disks, irqbalance, which irq_affinity keeps off the pinned interrupts):
# a package install under TCG emulation is slow, and the
# container hosts already prove the install path.
VM_PACKAGES=$HOST_PACKAGES,linux-image-amd64,initramfs-tools,e2fsprogs,chrony,xfsprogs,irqbalance
VM_DEFAULT_NAME=sb-vm-1
# A blank second disk, /dev/vdb in the guest: the memory pool's local_disks names it.
VM_DATA_DISK_SIZE=${SANDBOX_VM_DATA_DISK_SIZE:-4G}
VM_DATA_DISK_SERIAL=k8s-data-1 # /dev/disk/by-id/virtio-k8s-data-1, the name the pool's local_disks use
# Two small disks with serial numbers (vdc, vdd) that vm-restart --swap-disks boots in the other order:
# local_disks' proof that a pool naming disks by kernel name is refused after renumbering, and by-id is not.
VM_SWAP_DISKS=(k8s-swap-a k8s-swap-b)
VM_SWAP_DISK_SIZE=64M

export CONTAINERS_CONF=$PODMAN_DIR/containers.conf
export CONTAINERS_STORAGE_CONF=$PODMAN_DIR/storage.conf
export CONTAINERS_REGISTRIES_CONF=$PODMAN_DIR/registries.conf
export TMPDIR=$STATE/tmp

usage() {
  cat <<EOF
Usage: tests/hosts/sandbox.sh COMMAND [ARGS]

Disposable Debian ($SUITE) hosts for the host layer, all state under .state/ of this checkout.

Commands:
  install        apt-get install what this needs (podman, slirp4netns, runc, mmdebstrap, qemu; gpg, which signs
                 the tests' local apt repository); root, Debian
  image          build the host rootfs and its podman image once; rebuilt only when the recipe changes
  up [N | --from-inventory DIR]
                 start one systemd host per inventory host (default: --from-inventory inventories/sandbox)
                 or N hosts named sb-host-1..N; container and hostname = the inventory host's name,
                 ssh published on 127.0.0.1 only. Each mounts the repository of containerd.io and the kubelet
                 (built first from ./dev.sh tools' binaries) read-only at $APT_SERVED. Writes the connection variables to
                 .state/hosts/inventory.yml (use: ansible-playbook -i inventories/sandbox -i .state/hosts/inventory.yml).
                 Idempotent: running hosts of the current image are kept; hosts no longer wanted are removed.
  down           remove every sandbox host (and the overlay inventory)
  restart NAME...
                 reboot running hosts: systemd shuts down and boots again in the same container (its files
                 and ssh port kept), then wait for systemd and ssh
  status         list the sandbox hosts and the VM
  vm-up [--as NAME]
                 boot the emulated VM (qemu TCG, the rootfs's own kernel, a qcow2 overlay, a blank
                 $VM_DATA_DISK_SIZE second disk /dev/vdb with serial $VM_DATA_DISK_SERIAL, two $VM_SWAP_DISK_SIZE disks vdc and vdd,
                 the NIC named eth0) and wait for ssh; connection variables in
                 .state/vm/inventory.yml under host NAME (default $VM_DEFAULT_NAME; --as sb-mem-1 makes the VM stand in
                 for that inventory host: -i inventories/sandbox -i .state/vm/inventory.yml --limit sb-mem-1)
  vm-restart [--swap-disks]
                 power the VM off and boot it again (its disks kept); --swap-disks boots the two small
                 disks with serial numbers (vdc, vdd; /dev/disk/by-id/virtio-k8s-swap-a, -b) in the other order
  vm-down        stop the VM and drop its overlay and data disks (the base image stays cached)
  ssh NAME [CMD] ssh to a host or to $VM_DEFAULT_NAME with the sandbox key
  vm-ssh [CMD]   ssh to the VM, whatever name it stands in for

Environment: SANDBOX_SUITE (bookworm), SANDBOX_MIRROR, SANDBOX_HOST_BOOT_TIMEOUT (s, $HOST_BOOT_TIMEOUT), SANDBOX_VM_MEMORY (MiB, $VM_MEMORY),
SANDBOX_VM_BOOT_TIMEOUT (s, $VM_BOOT_TIMEOUT), SANDBOX_VM_DATA_DISK_SIZE ($VM_DATA_DISK_SIZE), SANDBOX_VM_ACCEL ($VM_ACCEL), SANDBOX_VM_CPU ($VM_CPU), SANDBOX_STATE (.state),
SANDBOX_IMAGE_CACHE (~/.cache/k8s-node-pools/sandbox: the host rootfs tar and the VM image, shared by checkouts).
EOF
}

T0=$(date +%s.%N)
step_start=
step() { step_start=$(date +%s.%N); printf '==> %s\n' "$*"; }
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
done_step() { printf '    done in %s s%s\n' "$(since "$step_start")" "${1:+ ($1)}"; }
die() { printf 'sandbox: %s\n' "$*" >&2; exit 1; }
need() { for c in "$@"; do command -v "$c" >/dev/null || die "$c is missing: run tests/hosts/sandbox.sh install"; done; }

setup_podman() {
  mkdir -p "$PODMAN_DIR" "$TMPDIR" "$HOSTS_DIR"
  # runc: crun refuses this kernel's hybrid cgroups; cgroupfs: PID 1 is not systemd; slirp4netns: the
  # default bridge network would add a bridge and turn on ip_forward; ulimits: no CAP_SYS_RESOURCE here.
  cat >"$CONTAINERS_CONF.new" <<EOF
[containers]
netns = "slirp4netns"
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
log_driver = "k8s-file"

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "$PODMAN_DIR/events.log"
tmp_dir = "$PODMAN_DIR/tmp"
volume_path = "$PODMAN_DIR/volumes"
static_dir = "$PODMAN_DIR/libpod"

[network]
network_config_dir = "$PODMAN_DIR/networks"
EOF
  cat >"$CONTAINERS_STORAGE_CONF.new" <<EOF
[storage]
driver = "overlay"
graphroot = "$PODMAN_DIR/storage"
runroot = "$PODMAN_DIR/run"
EOF
  printf 'unqualified-search-registries = []\n' >"$CONTAINERS_REGISTRIES_CONF.new"
  for f in "$CONTAINERS_CONF" "$CONTAINERS_STORAGE_CONF" "$CONTAINERS_REGISTRIES_CONF"; do
    if cmp -s "$f.new" "$f"; then rm "$f.new"; else mv "$f.new" "$f"; fi
  done
}

pm() { podman "$@"; }

ssh_key() {
  mkdir -p "$HOSTS_DIR"
  # Locked: `up` and `vm-up` may start at once (./dev.sh test runs the VM tier beside the rest).
  (
    flock 9
    [[ -f $HOSTS_DIR/id_ed25519 ]] || ssh-keygen -q -t ed25519 -N '' -C sandbox -f "$HOSTS_DIR/id_ed25519"
  ) 9>"$HOSTS_DIR/.id_ed25519.lock"
}

SSH_OPTS=(-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o BatchMode=yes
  -o ConnectTimeout=5)

# The rootfs recipe, shared by the containers and the VM. Its hash names the image, so a changed
# recipe (or a changed version of this script's recipe parts) builds a new one.
recipe() { # $1 = packages
  cat <<EOF
suite=$SUITE mirror=$MIRROR security=$SECURITY_MIRROR variant=minbase packages=$1
$(declare -f customize_hook)
EOF
}
recipe_hash() { recipe "$1" | sha256sum | cut -c1-12; }

# Run by mmdebstrap on the finished tree ($1). Host identity is made per host at boot, never shared.
customize_hook() {
  rm -f "$1"/etc/hostname "$1"/etc/ssh/ssh_host_*
  : >"$1"/etc/machine-id
  mkdir -p "$1"/etc/systemd/system/ssh.service.d
  printf '[Service]\nExecStartPre=\nExecStartPre=/usr/bin/ssh-keygen -A\nExecStartPre=/usr/sbin/sshd -t\n' \
    >"$1"/etc/systemd/system/ssh.service.d/10-host-keys.conf
  mkdir -p "$1"/root/.ssh && chmod 700 "$1"/root/.ssh
  sed -i 's/^#\?PermitRootLogin.*/PermitRootLogin prohibit-password/' "$1"/etc/ssh/sshd_config
}

build_rootfs() { # $1 = packages, $2 = output (tar or directory)
  need mmdebstrap
  # --skip=cleanup/apt/lists keeps the package lists: apt's cache_valid_time would skip the update and
  # the roles' installs would then fail.
  mmdebstrap --quiet --variant=minbase ${3:+--format=$3} --include="$1" --skip=cleanup/apt/lists \
    --customize-hook="$(declare -f customize_hook); customize_hook \"\$1\"" \
    "$SUITE" "$2" \
    "deb $MIRROR $SUITE main" "deb $MIRROR $SUITE-updates main" "deb $SECURITY_MIRROR $SUITE-security main"
}

image_tag() { echo "$IMAGE_REPO:$(recipe_hash "$HOST_PACKAGES")"; }

cmd_image() {
  need podman
  setup_podman
  local tag tar
  tag=$(image_tag)
  if pm image exists "$tag"; then
    echo "==> image $tag is current (recipe unchanged)"
    return
  fi
  mkdir -p "$IMAGES_DIR"
  tar=$IMAGES_DIR/host-${tag##*:}.tar
  if [[ -f $tar ]]; then
    echo "==> rootfs $tar is cached"
  else
    step "build the $SUITE rootfs with mmdebstrap (minbase + $HOST_PACKAGES)"
    build_rootfs "$HOST_PACKAGES" "$tar.$$.partial" tar
    mv "$tar.$$.partial" "$tar"
    rm -f "$IMAGES_DIR"/host-*.tar.partial
    find "$IMAGES_DIR" -maxdepth 1 -name 'host-*.tar' ! -name "${tar##*/}" -delete # older recipes' rootfs
    done_step "$(du -h "$tar" | cut -f1) tar"
  fi
  step "import it as $tag"
  pm import --quiet --change 'CMD ["/sbin/init"]' --change 'ENV container=podman' \
    --change 'STOPSIGNAL SIGRTMIN+3' "$tar" "$tag" >/dev/null
  done_step
}

# Hosts wanted: names, one a line.
wanted_hosts() { # args as given to up
  if [[ $# -ge 1 && $1 =~ ^[0-9]+$ ]]; then
    for ((i = 1; i <= $1; i++)); do echo "sb-host-$i"; done
    return
  fi
  local inv=inventories/sandbox
  if [[ $# -ge 1 ]]; then
    [[ $1 == --from-inventory && $# -eq 2 ]] || die "up takes N or --from-inventory DIR"
    inv=$2
  fi
  [[ $inv = /* ]] || inv=$ROOT/$inv
  [[ -e $inv ]] || die "no inventory at $inv"
  if [[ -x $ROOT/.venv/bin/ansible-inventory ]]; then
    "$ROOT/.venv/bin/ansible-inventory" -i "$inv" --list 2>/dev/null |
      python3 -c 'import json,sys; print("\n".join(sorted(json.load(sys.stdin)["_meta"]["hostvars"])))'
  else
    python3 - "$inv" <<'EOF'
import pathlib, sys, yaml
p = pathlib.Path(sys.argv[1]); p = p / "hosts.yml" if p.is_dir() else p
names = set()
def walk(group):
    for name in (group or {}).get("hosts") or {}: names.add(name)
    for child in ((group or {}).get("children") or {}).values(): walk(child)
for group in (yaml.safe_load(p.read_text()) or {}).values(): walk(group)
print("\n".join(sorted(names)))
EOF
  fi
}

our_containers() { pm ps -a --filter "label=$LABEL" --format '{{.Names}}'; }

host_port() { pm port "$1" 22/tcp | sed 's/.*://'; }

wait_host() { # $1 = name: systemd up (within HOST_BOOT_TIMEOUT s), then ssh answering
  local name=$1 state port deadline=$((SECONDS + HOST_BOOT_TIMEOUT))
  while :; do
    state=$(pm exec "$name" systemctl is-system-running 2>/dev/null || true)
    [[ $state == running || $state == degraded || $SECONDS -ge $deadline ]] && break
    sleep 0.25
  done
  if [[ $state != running && $state != degraded ]]; then
    pm exec "$name" systemctl list-jobs --no-pager >&2 || true
    die "$name: systemd is '$state' after $HOST_BOOT_TIMEOUT s (its pending jobs above)"
  fi
  [[ $state == degraded ]] && echo "    $name: systemd degraded: $(pm exec "$name" systemctl --failed --plain --no-legend | awk '{print $1}' | tr '\n' ' ')"
  port=$(host_port "$name")
  for _ in $(seq 1 60); do
    ssh "${SSH_OPTS[@]}" -i "$HOSTS_DIR/id_ed25519" -p "$port" root@127.0.0.1 true 2>/dev/null && return 0
    sleep 0.5
  done
  die "$name: no ssh on 127.0.0.1:$port after 30 s"
}

write_overlay() {
  local out=$HOSTS_DIR/inventory.yml name
  {
    echo "# Written by tests/hosts/sandbox.sh up: how to reach the sandbox hosts. Use with -i inventories/sandbox."
    echo "# Host variables, so they win over any group's; sandbox_container names the podman container."
    echo "all:"
    echo "  hosts:"
    for name in "$@"; do
      echo "    $name:"
      echo "      ansible_host: 127.0.0.1"
      echo "      ansible_port: $(host_port "$name")"
      echo "      ansible_user: root"
      echo "      ansible_python_interpreter: /usr/bin/python3"
      echo "      ansible_ssh_private_key_file: $HOSTS_DIR/id_ed25519"
      echo "      ansible_ssh_common_args: -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"
      echo "      sandbox_container: $name"
    done
  } >"$out.new"
  mv "$out.new" "$out"
}

cmd_up() {
  need podman ssh
  local tag names=() name started=() kept=() old wanted
  wanted=$(wanted_hosts "$@") # not in a process substitution, so that its errors stop the run
  [[ -n $wanted ]] || die "no hosts to start"
  mapfile -t names <<<"$wanted"
  cmd_image
  ssh_key
  sandbox_repository
  tag=$(image_tag)
  for name in $(our_containers); do
    if ! printf '%s\n' "${names[@]}" | grep -qx "$name"; then
      step "remove $name (not wanted any more)"
      pm rm -f -t 5 "$name" >/dev/null
      done_step
    fi
  done
  step "start ${#names[@]} host(s): ${names[*]}"
  for name in "${names[@]}"; do
    if pm container exists "$name"; then
      [[ $(pm inspect -f "{{index .Config.Labels \"$LABEL\"}}" "$name") == 1 ]] ||
        die "a container named $name exists and is not a sandbox host: remove or rename it"
      if [[ $(pm inspect -f '{{.ImageName}}' "$name") != "$tag" ]]; then
        echo "    $name runs an older image: recreating"
        pm rm -f -t 5 "$name" >/dev/null
      elif ! pm inspect -f '{{range .Mounts}}{{.Destination}} {{end}}' "$name" | grep -qw "$APT_SERVED"; then
        echo "    $name lacks the sandbox repository mount: recreating"
        pm rm -f -t 5 "$name" >/dev/null
      elif [[ $(pm inspect -f '{{.State.Running}}' "$name") == true ]]; then
        kept+=("$name")
        continue
      else
        pm start "$name" >/dev/null
        started+=("$name")
        continue
      fi
    fi
    pm run -d --name "$name" --hostname "$name" --label "$LABEL=1" \
      --systemd=always --network slirp4netns --publish 127.0.0.1::22 \
      -v "$HOSTS_DIR/id_ed25519.pub:/root/.ssh/authorized_keys:ro" \
      -v "$APT_DIR/repo:$APT_SERVED:ro" \
      "$tag" >/dev/null
    started+=("$name")
  done
  done_step "${#started[@]} started, ${#kept[@]} already running"
  step "wait for systemd and ssh"
  for name in "${names[@]}"; do wait_host "$name" & done
  wait_all
  write_overlay "${names[@]}"
  done_step "inventory overlay: ${HOSTS_DIR#"$ROOT"/}/inventory.yml"
  # Images of older recipes, once no host uses them.
  for old in $(pm images --filter "reference=$IMAGE_REPO" --format '{{.Repository}}:{{.Tag}}'); do
    [[ $old == "$tag" ]] || pm image rm "$old" >/dev/null 2>&1 || true
  done
}

# The containerd.io and kubelet packages the hosts install come from a local repository: containerd and the kubelet
# built from their Go modules (./dev.sh tools), packaged and signed by tests/hosts/aptrepo.py, which also packs the
# hosts' container images (tools/images' programs) and writes the role settings for both.
sandbox_repository() {
  local bin kubelet programs
  bin=$(TOOLS_FAMILIES=containerd "$ROOT/tools/build.sh" --print-path)
  kubelet=$(TOOLS_FAMILIES=kubernetes "$ROOT/tools/build.sh" --print-path)/kubelet
  programs=$(TOOLS_FAMILIES=images "$ROOT/tools/build.sh" --print-path)
  [[ -x $bin/containerd ]] || die "containerd is not built ($bin): run ./dev.sh tools"
  [[ -x $kubelet ]] || die "the kubelet is not built ($kubelet): run ./dev.sh tools"
  [[ -x $programs/pause ]] || die "the images' programs are not built ($programs): run ./dev.sh tools"
  step "containerd.io and kubelet repository, container images for the hosts (${APT_DIR#"$ROOT"/}/repo)"
  mkdir -p "$APT_DIR"
  # Locked: `up` and `vm-up` may start at once, and each makes sure the repository is current.
  (
    flock 9
    python3 "$ROOT/tests/hosts/aptrepo.py" sandbox "$APT_DIR" "$bin" "$kubelet" "$programs" | sed 's/^/    /'
  ) 9>"$APT_DIR/.lock"
  done_step
}

wait_all() { local rc=0; while true; do wait -n || { [[ $? == 127 ]] && break; rc=1; }; done; [[ $rc == 0 ]] || die "a host did not come up"; }

cmd_down() {
  setup_podman
  local names
  mapfile -t names < <(our_containers)
  step "remove ${#names[@]} host(s)${names[*]:+: ${names[*]}}"
  [[ ${#names[@]} -eq 0 ]] || pm rm -f -t 5 "${names[@]}" >/dev/null
  rm -f "$HOSTS_DIR/inventory.yml"
  done_step
}

cmd_restart() {
  [[ $# -ge 1 ]] || die "restart: name the host(s) to reboot"
  need podman ssh
  setup_podman
  local name
  for name in "$@"; do
    [[ $(pm inspect -f "{{index .Config.Labels \"$LABEL\"}}" "$name" 2>/dev/null) == 1 ]] || die "$name is not a sandbox host"
  done
  step "reboot $*"
  pm restart -t 30 "$@" >/dev/null
  for name in "$@"; do wait_host "$name" & done
  wait_all
  done_step
}

cmd_status() {
  setup_podman
  echo "image: $(image_tag) $(pm image exists "$(image_tag)" && echo built || echo 'not built')"
  pm ps -a --filter "label=$LABEL" --format 'table {{.Names}}\t{{.Status}}\t{{.Ports}}\t{{.Image}}'
  if vm_running; then echo "vm: $(vm_name) running, pid $(cat "$VM_DIR/qemu.pid"), ssh 127.0.0.1:$(cat "$VM_DIR/port")"
  else echo "vm: not running"; fi
}

# ---- emulated VM tier ------------------------------------------------------------------------------

vm_running() { [[ -f $VM_DIR/qemu.pid ]] && kill -0 "$(cat "$VM_DIR/qemu.pid")" 2>/dev/null; }
vm_name() { cat "$VM_DIR/name" 2>/dev/null || echo "$VM_DEFAULT_NAME"; }

# The VM's image, keyless, is built once per recipe into the image cache (IMAGES_DIR, beside the hosts'
# rootfs tar) and shared by checkouts; each checkout copies it (sparse, seconds) and writes its own ssh
# key into the copy with debugfs, without mounting anything.
vm_image() {
  need mmdebstrap qemu-img mkfs.ext4 debugfs
  ssh_key
  local h cached base
  h=$( (recipe "$VM_PACKAGES"; declare -f vm_build_image) | sha256sum | cut -c1-12)
  cached=$IMAGES_DIR/vm-$h
  base=$VM_DIR/base-$h-$(sha256sum <"$HOSTS_DIR/id_ed25519.pub" | cut -c1-8)
  if [[ -f $base.raw ]]; then
    echo "==> VM image $h is current"
    VM_BASE=$base
    return
  fi
  if [[ -f $cached.raw ]]; then
    echo "==> VM image $h is cached (${cached%/*})"
  else
    vm_build_image "$cached"
  fi
  step "copy it into ${VM_DIR#"$ROOT"/} with this checkout's ssh key"
  mkdir -p "$VM_DIR"
  rm -rf "$VM_DIR"/base-* # an older recipe's or key's image
  cp --sparse=always "$cached.raw" "$base.raw.partial"
  printf '%s\n' "write $HOSTS_DIR/id_ed25519.pub /root/.ssh/authorized_keys" \
    "sif /root/.ssh/authorized_keys uid 0" "sif /root/.ssh/authorized_keys gid 0" \
    "sif /root/.ssh/authorized_keys mode 0100600" | debugfs -w -f - "$base.raw.partial" >/dev/null 2>&1
  [[ $(debugfs -R "cat /root/.ssh/authorized_keys" "$base.raw.partial" 2>/dev/null) == "$(cat "$HOSTS_DIR/id_ed25519.pub")" ]] ||
    die "could not write the ssh key into the VM image $base.raw.partial (debugfs)"
  cp "$cached.vmlinuz" "$base.vmlinuz"
  cp "$cached.initrd" "$base.initrd"
  mv "$base.raw.partial" "$base.raw"
  done_step
  VM_BASE=$base
}

vm_build_image() { # $1 = its path in the cache, without suffix
  # The tree is built in this checkout's state (mmdebstrap mounts /proc in it), the image written to the cache.
  local out=$1 root=$VM_DIR/rootfs.$$
  mkdir -p "${out%/*}" "$VM_DIR"
  step "build the VM rootfs with mmdebstrap (+ linux-image-amd64)"
  build_rootfs "$VM_PACKAGES" "$root" directory
  done_step "$(du -sh "$root" | cut -f1)"
  step "make its ext4 image (the base every boot overlays)"
  mkdir -p -m 700 "$root/root/.ssh"
  printf '/dev/vda / ext4 rw,errors=remount-ro 0 1\n' >"$root/etc/fstab"
  printf '%s\n' "$VM_DEFAULT_NAME" >"$root/etc/hostname"
  printf '[Match]\nName=en* eth*\n[Network]\nDHCP=yes\n' >"$root/etc/systemd/network/10-dhcp.network"
  ln -sf /lib/systemd/system/systemd-networkd.service \
    "$root/etc/systemd/system/multi-user.target.wants/systemd-networkd.service"
  local kernels=("$root"/boot/vmlinuz-*) initrds=("$root"/boot/initrd.img-*)
  cp "${kernels[-1]}" "$out.vmlinuz"
  cp "${initrds[-1]}" "$out.initrd"
  # A sparse raw file as the read-only base; each boot writes to its own qcow2 overlay.
  truncate -s 4G "$out.raw.$$.partial"
  mkfs.ext4 -q -F -L root -d "$root" "$out.raw.$$.partial"
  mv "$out.raw.$$.partial" "$out.raw"
  rm -rf "$root"
  find "${out%/*}" -maxdepth 1 -name 'vm-*' ! -name "${out##*/}.*" -delete # older recipes' images
  done_step "$(du -h "$out.raw" | cut -f1) used of 4G"
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# Starts qemu on the VM's files (vm-up made them) and waits for ssh. The drives' order makes the root disk
# vda, the memory pool's blank data disk vdb (serial k8s-data-1), and the two small disks with serial numbers (their
# /dev/disk/by-id/virtio-SERIAL names follow the disk) vdc and vdd - or vdd and vdc after vm-restart
# --swap-disks, as NVMe names renumber between boots.
vm_launch() {
  local name port base disks=("${VM_SWAP_DISKS[@]}") swap_drives=() disk
  name=$(vm_name)
  port=$(cat "$VM_DIR/port")
  base=$(cat "$VM_DIR/base")
  [[ -f $VM_DIR/swapped ]] && disks=("${disks[1]}" "${disks[0]}")
  # Every disk an explicit device, so the kernel names them in this order (qemu creates -device disks
  # before if=virtio ones); a serial number gives a disk its /dev/disk/by-id/virtio-SERIAL name.
  for disk in "${disks[@]}"; do
    swap_drives+=(-drive "file=$VM_DIR/$disk.qcow2,if=none,id=$disk,format=qcow2" -device "virtio-blk-pci,drive=$disk,serial=$disk")
  done
  # net.ifnames=0: the NIC is eth0, as the pools' irq_affinity names it; systemd.hostname: the name the
  # VM stands in for. A reboot inside the guest boots the same kernel and command line again (qemu keeps
  # -kernel and -append).
  qemu-system-x86_64 -name "$name" -machine q35 -accel "$VM_ACCEL" -cpu "$VM_CPU" -smp 2 -m "$VM_MEMORY" \
    -kernel "$base.vmlinuz" -initrd "$base.initrd" \
    -append "root=/dev/vda rw console=ttyS0 quiet systemd.show_status=0 net.ifnames=0 systemd.hostname=$name" \
    -drive "file=$VM_DIR/overlay.qcow2,if=none,id=root,format=qcow2" -device virtio-blk-pci,drive=root \
    -drive "file=$VM_DIR/vdb.qcow2,if=none,id=data,format=qcow2" -device "virtio-blk-pci,drive=data,serial=$VM_DATA_DISK_SERIAL" \
    "${swap_drives[@]}" \
    -netdev "user,id=n0,ipv6=off,hostfwd=tcp:127.0.0.1:$port-:22" -device virtio-net-pci,netdev=n0 \
    -display none -serial "file:$VM_DIR/console.log" -monitor none \
    -pidfile "$VM_DIR/qemu.pid" -daemonize
  local deadline=$((SECONDS + VM_BOOT_TIMEOUT))
  until ssh "${SSH_OPTS[@]}" -i "$HOSTS_DIR/id_ed25519" -p "$port" root@127.0.0.1 true 2>/dev/null; do
    vm_running || die "qemu exited; see ${VM_DIR#"$ROOT"/}/console.log"
    ((SECONDS < deadline)) || die "no ssh after ${VM_BOOT_TIMEOUT} s; see ${VM_DIR#"$ROOT"/}/console.log"
    sleep 2
  done
}

cmd_vm_restart() {
  [[ $# -eq 0 || ($# -eq 1 && $1 == --swap-disks) ]] || die "vm-restart takes only --swap-disks"
  vm_running || die "the VM is not running: vm-up first"
  step "power the VM off and boot it again${1:+, vdc and vdd swapped}"
  local pid
  pid=$(cat "$VM_DIR/qemu.pid")
  ssh "${SSH_OPTS[@]}" -i "$HOSTS_DIR/id_ed25519" -p "$(cat "$VM_DIR/port")" root@127.0.0.1 systemctl poweroff || true
  for _ in $(seq 1 "$VM_BOOT_TIMEOUT"); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  kill -0 "$pid" 2>/dev/null && die "the VM did not power off in ${VM_BOOT_TIMEOUT} s"
  if [[ ${1:-} == --swap-disks ]]; then
    if [[ -f $VM_DIR/swapped ]]; then rm "$VM_DIR/swapped"; else touch "$VM_DIR/swapped"; fi
  fi
  vm_launch
  done_step
}

cmd_vm_up() {
  need qemu-system-x86_64 ssh
  local name=$VM_DEFAULT_NAME
  if [[ $# -ge 1 ]]; then
    [[ $1 == --as && $# -eq 2 && $2 =~ ^[A-Za-z0-9][A-Za-z0-9.-]*$ ]] || die "vm-up takes --as NAME (a host name)"
    name=$2
  fi
  if vm_running; then
    [[ $(vm_name) == "$name" ]] || die "the VM already runs as $(vm_name); vm-down first to start it as $name"
    echo "==> VM $name already running (ssh 127.0.0.1:$(cat "$VM_DIR/port"))"
    return
  fi
  vm_image
  local port
  port=$(free_port)
  step "boot the VM as $name (${VM_ACCEL%%,*}, ${VM_MEMORY} MiB, ssh on 127.0.0.1:$port)"
  qemu-img create -q -f qcow2 -F raw -b "$VM_BASE.raw" "$VM_DIR/overlay.qcow2"
  qemu-img create -q -f qcow2 "$VM_DIR/vdb.qcow2" "$VM_DATA_DISK_SIZE"
  for disk in "${VM_SWAP_DISKS[@]}"; do qemu-img create -q -f qcow2 "$VM_DIR/$disk.qcow2" "$VM_SWAP_DISK_SIZE"; done
  rm -f "$VM_DIR/swapped"
  echo "$port" >"$VM_DIR/port"
  echo "$name" >"$VM_DIR/name"
  echo "$VM_BASE" >"$VM_DIR/base"
  vm_launch
  {
    echo "# Written by tests/hosts/sandbox.sh vm-up."
    echo "all:"
    echo "  hosts:"
    echo "    $name: {ansible_host: 127.0.0.1, ansible_port: $port, ansible_user: root,"
    echo "              ansible_python_interpreter: /usr/bin/python3, ansible_ssh_private_key_file: $HOSTS_DIR/id_ed25519,"
    # Keep-alives: across a guest reboot qemu's user network keeps the host side of an ssh connection open, so
    # Ansible's ControlMaster for the VM would wait on the dead session for ever (seen: a reboot task's boot_id
    # check hung 20 min). Unanswered for 2 min, the master gives up and the reboot module reconnects.
    echo "              ansible_ssh_common_args: -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"
    echo "                -o ServerAliveInterval=15 -o ServerAliveCountMax=8}"
  } >"$VM_DIR/inventory.yml"
  done_step "qemu RSS $(($(awk '/VmRSS/{print $2}' "/proc/$(cat "$VM_DIR/qemu.pid")/status") / 1024)) MiB"
}

cmd_vm_down() {
  step "stop the VM"
  if vm_running; then
    local pid
    pid=$(cat "$VM_DIR/qemu.pid")
    kill "$pid"
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
  fi
  rm -f "$VM_DIR/qemu.pid" "$VM_DIR/overlay.qcow2" "$VM_DIR/vdb.qcow2" "$VM_DIR/port" "$VM_DIR/name" \
    "$VM_DIR/inventory.yml" "$VM_DIR/base" "$VM_DIR/swapped"
  for disk in "${VM_SWAP_DISKS[@]}"; do rm -f "$VM_DIR/$disk.qcow2"; done
  done_step
}

cmd_ssh() {
  [[ $# -ge 1 ]] || die "ssh NAME [CMD]"
  local name=$1 port
  shift
  if [[ $name == "$VM_DEFAULT_NAME" ]]; then port=$(cat "$VM_DIR/port"); else setup_podman; port=$(host_port "$name"); fi
  exec ssh "${SSH_OPTS[@]}" -i "$HOSTS_DIR/id_ed25519" -p "$port" root@127.0.0.1 "$@"
}

cmd_install() {
  step "apt-get install podman slirp4netns runc mmdebstrap qemu-system-x86 qemu-utils uidmap gpg"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    podman slirp4netns runc mmdebstrap qemu-system-x86 qemu-utils uidmap openssh-client e2fsprogs gpg >/dev/null
  done_step
}

main() {
  [[ $# -ge 1 ]] || { usage; exit 2; }
  local cmd=$1
  shift
  case $cmd in
    -h | --help | help) usage ;;
    install) cmd_install ;;
    image) cmd_image ;;
    up) cmd_up "$@" ;;
    down) cmd_down ;;
    restart) cmd_restart "$@" ;;
    status) cmd_status ;;
    vm-up) cmd_vm_up "$@" ;;
    vm-ssh) cmd_ssh "$VM_DEFAULT_NAME" "$@" ;;
    vm-restart) cmd_vm_restart "$@" ;;
    vm-down) cmd_vm_down ;;
    ssh) cmd_ssh "$@" ;;
    *) usage >&2; exit 2 ;;
  esac
  printf '==> %s finished in %s s\n' "$cmd" "$(since "$T0")"
}

main "$@"

// The sandbox's container images (issue 17): the programs inside them, static and from this module only, so the
// hosts run real containers without a registry. tests/hosts/ociimage.py packs them into OCI archives.
module k8s-node-pools/tools/images

go 1.24.0

tool (
	k8s-node-pools/tools/images/pause
	k8s-node-pools/tools/images/probe
)

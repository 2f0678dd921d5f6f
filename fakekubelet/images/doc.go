// Package images is the nodes' container images as a container runtime and the kubelet's image
// manager keep them (pkg/kubelet/images upstream): which images the registry has, as the user
// declares them (Rule); each node's image store; pulls that take time and fail, one at a time
// on each node as the kubelet's serialized puller makes them; the pull backoff per pod and image
// (10 s doubling to 300 s); and the pull policies. Ensure answers what a container's start
// finds, as EnsureImageExists does: the image present, a pull under way, or the reason and
// message the container shows (ErrImagePull, ImagePullBackOff, ErrImageNeverPull,
// InvalidImageName) with the events the kubelet records.
//
// It starts no container, records no event and writes nothing to the API: the pod workers do
// what its answers say. It never blocks: a pull runs on the clock and reports its end.
package images

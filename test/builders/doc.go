// Package builders makes the Kubernetes objects that restartbed's tests create, in the style of
// Kueue's and JobSet's wrappers: MakeJob(name, ns).Parallelism(2).Obj(). Obj returns a deep copy,
// so a builder can be reused. It builds values only; it talks to no apiserver.
package builders

// Package specs holds what restartbed's ginkgo suites share: the named timeouts of every
// Eventually, and helpers that give a spec a cluster or a namespace and clean up after it. It
// only creates and deletes objects through the clients it is given. SyncBuffer serves the plain
// tests too.
package specs

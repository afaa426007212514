package runtime

// ContainerConfig exposes the container a job gets, for tests that cannot
// run it (no GPU, no nvidia runtime).
var ContainerConfig = (*Container).containerConfig

// Package trainer is the provider side of the trainer contract (CONTRACT.md
// in this folder): the environment a trainer is started with (Env), the
// checkpoint folders and metrics log it writes (WriteCheckpoint,
// OpenMetricsLog), how the sidecar finds and validates them as they appear
// (Watcher, ReadCheckpoint) and how it judges the way a run ended (CheckRun).
//
// Every runtime (the in-process reference trainer, a subprocess, a
// container) speaks this one contract, so the rest of the sidecar hashes,
// serves and commits checkpoints the same way whatever produced them.
package trainer

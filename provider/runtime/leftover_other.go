//go:build !linux

package runtime

// TrainerGroupFileName is the file in Job.LogDir where ExactTorch records
// its trainer's process group while it runs (Linux only).
const TrainerGroupFileName = "trainer.pgid"

func recordGroup(string, int) error { return nil }

// StopLeftover kills a trainer an earlier, crashed sidecar left running for
// the lease whose log folder is logDir. It needs /proc: elsewhere it does
// nothing.
func StopLeftover(string) error { return nil }

//go:build linux

package runtime

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// TrainerGroupFileName is the file in Job.LogDir where ExactTorch records
// its trainer's process group while it runs: "<pgid> <start time>", the
// start time being the group leader's (/proc/<pid>/stat field 22), so that
// a reused id is never mistaken for it.
const TrainerGroupFileName = "trainer.pgid"

// recordGroup writes the trainer group file of a trainer just started.
func recordGroup(logDir string, pgid int) error {
	start, err := procStart(pgid)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(logDir, TrainerGroupFileName), fmt.Appendf(nil, "%d %s\n", pgid, start), 0o644)
}

// StopLeftover kills the trainer an earlier sidecar process started for the
// lease whose log folder is logDir and left running when it died (SIGKILL,
// a crash): the process runtime starts trainers in their own process group,
// so they outlive the sidecar, and one still writing checkpoint folders
// while a new run of the same lease rewrites them would corrupt what the
// sidecar reads. It waits until the group is gone and is a no-op when no
// trainer was recorded or it has ended.
func StopLeftover(logDir string) error {
	path := filepath.Join(logDir, TrainerGroupFileName)
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	pgidText, start, _ := strings.Cut(strings.TrimSpace(string(raw)), " ")
	pgid, err := strconv.Atoi(pgidText)
	if err == nil && pgid > 1 && groupLives(pgid) {
		// A group id cannot be reused while the group has members, so a
		// group whose leader is gone is still the trainer's; a living
		// leader must have the recorded start time.
		if leaderStart, err := procStart(pgid); err != nil || leaderStart == start {
			if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("runtime: killing the leftover trainer group %d: %w", pgid, err)
			}
			deadline := time.Now().Add(10 * time.Second)
			for groupLives(pgid) {
				if time.Now().After(deadline) {
					return fmt.Errorf("runtime: the leftover trainer group %d still runs 10s after SIGKILL", pgid)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// procStat returns the fields of /proc/<pid>/stat after the command name:
// [0] is field 3 (state), [2] field 5 (pgrp), [19] field 22 (start time).
func procStat(pid int) ([]string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 > len(b) {
		return nil, fmt.Errorf("runtime: /proc/%d/stat: unexpected format", pid)
	}
	fields := strings.Fields(string(b[i+2:]))
	if len(fields) < 20 {
		return nil, fmt.Errorf("runtime: /proc/%d/stat: unexpected format", pid)
	}
	return fields, nil
}

func procStart(pid int) (string, error) {
	f, err := procStat(pid)
	if err != nil {
		return "", err
	}
	return f[19], nil
}

// groupLives reports whether a process of group pgid runs (zombies, which
// no longer write anything, do not count).
func groupLives(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	want := strconv.Itoa(pgid)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f, err := procStat(pid); err == nil && f[2] == want && f[0] != "Z" && f[0] != "X" {
			return true
		}
	}
	return false
}

package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A tampering cheater that moved to a higher bit flips that bit again after a
// restart: the e2e tile game kills it mid-phase 2, and a cheater back at
// tamperBit would re-execute the step into records it never committed.
func TestTamperBitSurvivesARestart(t *testing.T) {
	home := t.TempDir()
	b, err := loadTamperBit(home)
	require.NoError(t, err)
	require.EqualValues(t, tamperBit, b.bit.Load())
	require.NoError(t, b.next())
	require.NoError(t, b.next())

	restarted, err := loadTamperBit(home)
	require.NoError(t, err)
	require.EqualValues(t, tamperBit+2, restarted.bit.Load())
}

package manifest_test

import (
	"encoding/hex"
	"sort"
)

func sortStrings(s []string) { sort.Strings(s) }

func hexRoot(s string) ([]byte, error) { return hex.DecodeString(s) }

package localnet

import (
	"fmt"
	"os"
	"strings"
)

// setTOML rewrites `key = value` lines inside the given [section] of a TOML file
// ("" for the top level). Every key must exist: a missing one means the config
// template changed and the caller would silently run with the wrong setting.
func setTOML(path string, values map[string]map[string]string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	lines := strings.Split(string(raw), "\n")
	section := ""
	found := map[string]bool{}
	for i, line := range lines {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "[") && strings.HasSuffix(trimmed, "]") {
			section = strings.Trim(trimmed, "[]")
			continue
		}
		key, _, ok := strings.Cut(trimmed, "=")
		if !ok {
			continue
		}
		key = strings.TrimSpace(key)
		if v, ok := values[section][key]; ok {
			lines[i] = key + " = " + v
			found[section+"."+key] = true
		}
	}
	for section, kv := range values {
		for key := range kv {
			if !found[section+"."+key] {
				return fmt.Errorf("%s: no key %q in section [%s]", path, key, section)
			}
		}
	}
	return os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644)
}

func quote(s string) string { return fmt.Sprintf("%q", s) }

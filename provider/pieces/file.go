package pieces

import (
	"os"
	"path/filepath"
)

// WriteFileAtomic writes path with what write puts in a synced temporary file beside it,
// renamed over path only when write succeeds, so a crash or a failed download leaves the
// old file or the new one, never a part. It creates the folders on the way.
func WriteFileAtomic(path string, write func(*os.File) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) //nolint:errcheck // gone after the rename
	if err := write(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// WriteBytesAtomic is WriteFileAtomic of data.
func WriteBytesAtomic(path string, data []byte) error {
	return WriteFileAtomic(path, func(f *os.File) error {
		_, err := f.Write(data)
		return err
	})
}

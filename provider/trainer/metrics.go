package trainer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// StepMetric is one line of the metrics log: the step it describes and its
// training loss. Trainers may add fields of their own; readers ignore them.
type StepMetric struct {
	// Step is the step number after the update, as in the trace (h_Step).
	Step uint64 `json:"step"`
	// Loss is the step's training loss in nats.
	Loss float64 `json:"loss"`
}

// MetricsLog appends StepMetric lines to a run's metrics log.
type MetricsLog struct {
	f *os.File
	w *bufio.Writer
}

// OpenMetricsLog opens (creating or appending to) outputDir's metrics log.
func OpenMetricsLog(outputDir string) (*MetricsLog, error) {
	f, err := os.OpenFile(filepath.Join(outputDir, MetricsFileName), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &MetricsLog{f: f, w: bufio.NewWriter(f)}, nil
}

// Append writes m as one line. Lines reach the file at the latest on Flush.
func (l *MetricsLog) Append(m StepMetric) error {
	line, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if _, err := l.w.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("writing %s: %w", l.f.Name(), err)
	}
	return nil
}

// Flush writes buffered lines to the file; a trainer flushes at least at
// every checkpoint so the log covers what the checkpoint covers.
func (l *MetricsLog) Flush() error {
	if err := l.w.Flush(); err != nil {
		return fmt.Errorf("writing %s: %w", l.f.Name(), err)
	}
	return nil
}

// Close flushes and closes the log.
func (l *MetricsLog) Close() error {
	flushErr := l.Flush()
	if err := l.f.Close(); err != nil && flushErr == nil {
		return err
	}
	return flushErr
}

// ReadMetrics reads outputDir's metrics log. A last line without its newline
// is one the trainer is still writing and is skipped; any other line that is
// not a JSON object with a step is an error. A missing log reads as empty.
func ReadMetrics(outputDir string) ([]StepMetric, error) {
	path := filepath.Join(outputDir, MetricsFileName)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if i := bytes.LastIndexByte(data, '\n'); i+1 < len(data) {
		data = data[:i+1] // drop the partial last line
	}
	var metrics []StepMetric
	for n, line := range bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var m struct {
			Step *uint64  `json:"step"`
			Loss *float64 `json:"loss"`
		}
		if err := json.Unmarshal(line, &m); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, n+1, err)
		}
		if m.Step == nil || m.Loss == nil {
			return nil, fmt.Errorf("%s line %d: needs \"step\" and \"loss\"", path, n+1)
		}
		metrics = append(metrics, StepMetric{Step: *m.Step, Loss: *m.Loss})
	}
	return metrics, nil
}

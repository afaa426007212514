package main

import (
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"
)

// msgKind names a message type in the report.
type msgKind string

const (
	kindSend       msgKind = "bank MsgSend"
	kindSubmitJob  msgKind = "market MsgSubmitJob"
	kindPlaceBid   msgKind = "market MsgPlaceBid"
	kindCheckpoint msgKind = "verify MsgSubmitCheckpoint"
	kindRegister   msgKind = "stakingext MsgRegisterProvider"
)

// gasTable gives each transaction a fixed gas limit (no simulation round
// trip): base per transaction plus an amount per message, a few times what
// the messages use, so that nothing runs out of gas and the limit never
// matters. The report shows gas used.
type gasTable struct {
	base   uint64
	perMsg map[msgKind]uint64
}

func defaultGas() gasTable {
	return gasTable{base: 60_000, perMsg: map[msgKind]uint64{
		kindSend: 40_000, kindSubmitJob: 80_000, kindPlaceBid: 50_000, kindCheckpoint: 150_000, kindRegister: 80_000,
	}}
}

func (g gasTable) limit(k msgKind, msgs int) uint64 { return g.base + g.perMsg[k]*uint64(msgs) }

// phase counts one phase's transactions; the tracker updates it under its lock.
type phase struct {
	name string
	// kinds are the messages whose inclusion the phase's throughput counts.
	kinds []msgKind
	// The phase's throughput window is the blocks after startHeight (the last
	// block before it sent anything) up to stopHeight (the last block when
	// it stopped sending); lastHeight is the last block that included one of
	// its transactions, drain included.
	startHeight, stopHeight, lastHeight int64
	// sending is how long the workers sent.
	sending time.Duration
	// idle is the time workers spent waiting for work (market tasks) or for a
	// free in-flight slot, summed over workers.
	idle atomic.Int64
	// toolCores, nodeCores and machineCores are the CPU the tool, the node
	// and the whole machine used over the phase, in cores.
	toolCores, nodeCores, machineCores float64

	sentTxs, sentMsgs int
	okTxs, okMsgs     int
	failedTxs         int
	rejected          int
	lost              int
	mempoolFull       int
	pending           int
	sentByKind        map[msgKind]int
	failures          map[string]int
	rejections        map[string]int
	gas               map[msgKind]*gasStat
	// unsent counts market work the phase created but ended before sending.
	unsent map[string]int
}

func newPhase(name string, kinds []msgKind) *phase {
	return &phase{
		name: name, kinds: kinds,
		sentByKind: map[msgKind]int{}, failures: map[string]int{}, rejections: map[string]int{},
		gas: map[msgKind]*gasStat{}, unsent: map[string]int{},
	}
}

func (p *phase) sent(kind msgKind, msgs int) {
	p.sentTxs++
	p.sentMsgs += msgs
	p.sentByKind[kind]++
}

func (p *phase) reject(kind msgKind, reason string) {
	p.rejected++
	p.rejections[fmt.Sprintf("%s: %s", kind, reasonClass(reason))]++
}

func (p *phase) included(st *sentTx, height int64, r *abci.ExecTxResult) {
	p.pending--
	p.lastHeight = max(p.lastHeight, height)
	if r.Code != 0 {
		p.failedTxs++
		p.failures[fmt.Sprintf("%s: %s code %d: %s", st.kind, r.Codespace, r.Code, reasonClass(r.Log))]++
		return
	}
	p.okTxs++
	p.okMsgs += st.msgs
	g := p.gas[st.kind]
	if g == nil {
		g = &gasStat{min: math.MaxInt64}
		p.gas[st.kind] = g
	}
	g.add(r.GasUsed, st.msgs)
}

var numbers = regexp.MustCompile(`\d+`)

// reasonClass turns an error log into a class of errors: numbers (ids,
// heights, sequences) become N and long logs are cut.
func reasonClass(log string) string {
	s := numbers.ReplaceAllString(strings.Join(strings.Fields(log), " "), "N")
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}

type gasStat struct {
	txs, msgs int
	sum       int64
	min, max  int64
}

func (g *gasStat) add(used int64, msgs int) {
	g.txs++
	g.msgs += msgs
	g.sum += used
	g.min = min(g.min, used)
	g.max = max(g.max, used)
}

// Report is what a run measured.
type Report struct {
	ChainID     string
	CPUs        int
	BlockTime   time.Duration // the node's timeout_commit (0: an existing node's, unknown)
	Concurrency int
	MsgsPerTx   int
	MaxPending  int
	Accounts    map[string]int
	Phases      []PhaseReport
	// Ratio is market over bank: successful transactions per second, and
	// messages per second. CPURatio compares transactions per CPU-second of
	// the node instead, which holds when other processes take a varying share
	// of the machine (0 when the tool did not start the node).
	Ratio, MsgRatio, CPURatio float64
	// WarmUps are the unmeasured phases, for the accounting of what was sent.
	WarmUps []PhaseReport
	Gas     []GasReport
	Market  MarketReport
	Wall    time.Duration
}

// PhaseReport is one phase.
type PhaseReport struct {
	Name string
	// Sent were accepted into the mempool (CheckTx passed) during the phase;
	// each is then Included (succeeded), Failed (in a block with an error),
	// or Lost. Rejected never entered the mempool.
	Sent, SentMsgs, Included, IncludedMsgs, Failed, Rejected, Lost int
	MempoolFull                                                    int
	// The throughput window: the blocks FirstHeight..LastHeight, committed
	// while the phase was sending, over Span (from the time of the block
	// before FirstHeight to that of LastHeight). WindowTxs and WindowMsgs are
	// the successful transactions and messages of the phase's kinds those
	// blocks include, whoever sent them (a market warm-up's tail counts).
	FirstHeight, LastHeight int64
	Span                    time.Duration
	WindowTxs, WindowMsgs   int
	WindowByKind            map[string]int // messages
	TxPerSec, MsgPerSec     float64
	// Sending is how long the workers sent.
	Sending time.Duration
	// Idle is the share of the workers' sending time spent waiting for work
	// or for an in-flight slot rather than signing and broadcasting: near 0,
	// the tool offered the node all the load it could.
	Idle float64
	// ToolCores, NodeCores and MachineCores are the CPU the load tool, the
	// node (0 if the tool did not start it) and the whole machine (node, tool
	// and anything else) used while the phase was sending, in cores.
	ToolCores, NodeCores, MachineCores float64
	// TxPerNodeCPUSec is TxPerSec over NodeCores: transactions per
	// CPU-second of the node.
	TxPerNodeCPUSec float64
	Blocks          BlockStats
	Failures        map[string]int
	Rejections      map[string]int
	Unsent          map[string]int
}

// BlockStats describes the intervals between consecutive blocks of a phase.
type BlockStats struct {
	Blocks              int
	Mean, P50, P95, Max time.Duration
	TxsPerBlock         float64
	MaxTxsPerBlock      int
}

// GasReport is the gas used by successful transactions of one message type.
type GasReport struct {
	Kind                  string
	Txs, Msgs             int
	MeanPerTx, MeanPerMsg float64
	Min, Max              int64
	Limit                 uint64 // the gas limit of a one-message transaction
}

// MarketReport follows the market phase's jobs through their life.
type MarketReport struct {
	Jobs, Bids, Leases, OurLeases, Checkpoints int
}

func (t *tracker) phaseReport(p *phase, workers int) PhaseReport {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := PhaseReport{
		Name: p.name, Sent: p.sentTxs, SentMsgs: p.sentMsgs, Included: p.okTxs, IncludedMsgs: p.okMsgs,
		Failed: p.failedTxs, Rejected: p.rejected, Lost: p.lost, MempoolFull: p.mempoolFull,
		FirstHeight: p.startHeight + 1, LastHeight: p.stopHeight, Sending: p.sending,
		ToolCores: p.toolCores, NodeCores: p.nodeCores, MachineCores: p.machineCores,
		Failures: p.failures, Rejections: p.rejections, Unsent: p.unsent,
	}
	if p.sending > 0 {
		r.Idle = float64(p.idle.Load()) / float64(p.sending*time.Duration(workers))
	}
	if p.stopHeight <= p.startHeight {
		return r
	}
	var intervals []time.Duration
	txs, maxTxs := 0, 0
	for h := p.startHeight + 1; h <= p.stopHeight; h++ {
		intervals = append(intervals, t.times[h].Sub(t.times[h-1]))
		txs += t.blockTxs[h]
		maxTxs = max(maxTxs, t.blockTxs[h])
		for _, k := range p.kinds {
			c := t.okAt[h][k]
			r.WindowTxs += c.txs
			r.WindowMsgs += c.msgs
			if r.WindowByKind == nil {
				r.WindowByKind = map[string]int{}
			}
			r.WindowByKind[string(k)] += c.msgs
		}
	}
	r.Blocks = blockStats(intervals, txs, maxTxs)
	r.Span = t.times[p.stopHeight].Sub(t.times[p.startHeight])
	if r.Span > 0 {
		r.TxPerSec = float64(r.WindowTxs) / r.Span.Seconds()
		r.MsgPerSec = float64(r.WindowMsgs) / r.Span.Seconds()
	}
	if p.nodeCores > 0 {
		r.TxPerNodeCPUSec = r.TxPerSec / p.nodeCores
	}
	return r
}

func blockStats(intervals []time.Duration, txs, maxTxs int) BlockStats {
	s := BlockStats{Blocks: len(intervals), MaxTxsPerBlock: maxTxs}
	if len(intervals) == 0 {
		return s
	}
	sorted := slices.Clone(intervals)
	slices.Sort(sorted)
	var sum time.Duration
	for _, d := range sorted {
		sum += d
	}
	s.Mean = sum / time.Duration(len(sorted))
	s.P50 = percentile(sorted, 50)
	s.P95 = percentile(sorted, 95)
	s.Max = sorted[len(sorted)-1]
	s.TxsPerBlock = float64(txs) / float64(len(sorted))
	return s
}

// percentile is the nearest-rank percentile of sorted values.
func percentile(sorted []time.Duration, p float64) time.Duration {
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[max(rank, 1)-1]
}

func (t *tracker) gasReports(g gasTable, phases ...*phase) []GasReport {
	t.mu.Lock()
	defer t.mu.Unlock()
	merged := map[msgKind]*gasStat{}
	for _, p := range phases {
		for k, s := range p.gas {
			m := merged[k]
			if m == nil {
				m = &gasStat{min: math.MaxInt64}
				merged[k] = m
			}
			m.txs += s.txs
			m.msgs += s.msgs
			m.sum += s.sum
			m.min = min(m.min, s.min)
			m.max = max(m.max, s.max)
		}
	}
	var out []GasReport
	for k, s := range merged {
		out = append(out, GasReport{
			Kind: string(k), Txs: s.txs, Msgs: s.msgs,
			MeanPerTx: float64(s.sum) / float64(s.txs), MeanPerMsg: float64(s.sum) / float64(s.msgs),
			Min: s.min, Max: s.max, Limit: g.limit(k, 1),
		})
	}
	order := []msgKind{kindSend, kindSubmitJob, kindPlaceBid, kindCheckpoint, kindRegister}
	sort.Slice(out, func(i, j int) bool {
		return slices.Index(order, msgKind(out[i].Kind)) < slices.Index(order, msgKind(out[j].Kind))
	})
	return out
}

// WriteTable prints the report as plain-text tables.
func (r *Report) WriteTable(w io.Writer) {
	bt := "the node's own"
	if r.BlockTime > 0 {
		bt = r.BlockTime.String()
	}
	fmt.Fprintf(w, "depinchain load test: one validator node (chain %s), %d CPU cores, timeout_commit %s,\n", r.ChainID, r.CPUs, bt)
	fmt.Fprintf(w, "concurrency %d, %d msg(s)/tx, at most %d txs in flight; accounts:", r.Concurrency, r.MsgsPerTx, r.MaxPending)
	for _, role := range []string{"bank", "owner", "provider"} {
		fmt.Fprintf(w, " %d %s", r.Accounts[role], role)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w)

	fmt.Fprintln(w, "throughput (successful txs included in the blocks committed while the phase was sending)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tblocks\tspan\ttxs\ttx/s\tmsgs/s\tworkers idle\tCPU node/tool/machine\ttx per node CPU-s\t")
	for _, p := range r.Phases {
		node, perCPU := "-", "-" // unknown for a node the tool did not start
		if p.NodeCores > 0 {
			node, perCPU = fmt.Sprintf("%.2f", p.NodeCores), fmt.Sprintf("%.0f", p.TxPerNodeCPUSec)
		}
		fmt.Fprintf(tw, "%s\t%d-%d\t%s\t%d\t%.1f\t%.1f\t%.0f%%\t%s/%.2f/%.2f\t%s\t\n", p.Name,
			p.FirstHeight, p.LastHeight, p.Span.Round(10*time.Millisecond), p.WindowTxs, p.TxPerSec, p.MsgPerSec, 100*p.Idle,
			node, p.ToolCores, p.MachineCores, perCPU)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nmarket/bank throughput ratio: %.2f (tx/s), %.2f (msgs/s)", r.Ratio, r.MsgRatio)
	if r.CPURatio > 0 {
		fmt.Fprintf(w, ", %.2f (tx per node CPU-second)", r.CPURatio)
	}
	fmt.Fprintln(w)
	for _, p := range r.Phases {
		if len(p.WindowByKind) > 1 {
			fmt.Fprintf(w, "%s mix:", p.Name)
			for _, k := range []msgKind{kindSubmitJob, kindPlaceBid, kindCheckpoint} {
				fmt.Fprintf(w, " %d %s", p.WindowByKind[string(k)], k)
			}
			fmt.Fprintln(w)
		}
	}
	fmt.Fprintln(w)

	fmt.Fprintln(w, "block times (between consecutive blocks of the phase)")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tintervals\tmean\tp50\tp95\tmax\ttxs/block\tmax txs/block\t")
	for _, p := range r.Phases {
		b := p.Blocks
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%.1f\t%d\t\n", p.Name, b.Blocks, ms(b.Mean), ms(b.P50), ms(b.P95), ms(b.Max), b.TxsPerBlock, b.MaxTxsPerBlock)
	}
	tw.Flush()

	fmt.Fprintln(w, "\ngas used per message type (successful transactions)")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "message\ttxs\tmsgs\tmean gas/msg\tmean gas/tx\tmin/tx\tmax/tx\tlimit (1 msg)\t")
	for _, g := range r.Gas {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%.0f\t%d\t%d\t%d\t\n", g.Kind, g.Txs, g.Msgs, g.MeanPerMsg, g.MeanPerTx, g.Min, g.Max, g.Limit)
	}
	tw.Flush()

	fmt.Fprintln(w, "\nevery transaction sent (accepted at CheckTx), by the phase that sent it")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tsent\tincluded ok\tfailed\tlost\trefused at CheckTx\t")
	for _, p := range append(slices.Clone(r.WarmUps), r.Phases...) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t\n", p.Name, p.Sent, p.Included, p.Failed, p.Lost, p.Rejected)
	}
	tw.Flush()

	m := r.Market
	fmt.Fprintf(w, "\nmarket pipeline (warm-up and phase): %d jobs created, %d bids placed, %d leases won by the tool's providers, %d checkpoints committed\n",
		m.Jobs, m.Bids, m.OurLeases, m.Checkpoints)
	for _, p := range append(slices.Clone(r.WarmUps), r.Phases...) {
		writeCounts(w, p.Name+": failed in a block", p.Failures)
		writeCounts(w, p.Name+": refused at CheckTx", p.Rejections)
		writeCounts(w, p.Name+": left unsent when the phase ended", p.Unsent)
		if p.MempoolFull > 0 {
			fmt.Fprintf(w, "%s: mempool full %d times (retried after a block)\n", p.Name, p.MempoolFull)
		}
	}
	fmt.Fprintf(w, "wall time %s\n", r.Wall.Round(time.Second))
}

func writeCounts(w io.Writer, title string, counts map[string]int) {
	if len(counts) == 0 {
		return
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintf(w, "%s:\n", title)
	for _, k := range keys {
		fmt.Fprintf(w, "  %6d  %s\n", counts[k], k)
	}
}

func ms(d time.Duration) string { return fmt.Sprintf("%dms", d.Milliseconds()) }

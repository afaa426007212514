// Package tiles splits one training step of the exact workload into what a
// dispute can decide one small piece at a time: phases 2 (operators) and 3
// (tiles) of x/verify's game.
//
// # Entries and the record root
//
// [NewStep] lays a step out as ordered entries: a load for every input of
// exact.TrainGraph (the step counter, each micro-batch's windows, every
// state tensor of the pre-state), one entry per operator in graph order, and
// a store (the next state file). Entry e has one output tensor and its root:
// the tensor's exact root (4 KiB chunks), or, for the store, h_{i+1}. A
// party's commitment ([Commit]) is the RFC 6962 Merkle root over the record
// leaves [RecordLeaf](e, kind, output root): the record root. It is at the
// same time the table of every tensor root of the step, since every tensor
// is written by exactly one entry ([Step.Writer]).
//
// # Phase 2: one descent over the records
//
// Both record roots differ (the store leaves carry different h_{i+1}). A
// [Descent] walks both trees from the root: each round both parties reveal
// the two children of their current node; the game goes left if the left
// children differ, else right. It ends at the leftmost differing leaf e:
// every leaf before e is the same in both trees, so the roots of e's inputs
// (outputs of earlier entries) are agreed and can be proven against either
// record root. Rounds: ceil(log2(entries)).
//
// # Phase 3: one descent over the output's chunks, then one element
//
// The parties' roots for e's output differ; a second [Descent] over the
// output tensor's chunk tree finds the leftmost differing chunk. Then:
//   - load of a state tensor: the chunk must equal the pre-state file's
//     chunk [StateChunk] proven against the agreed h_i;
//   - load of the step counter or of a micro-batch's windows: the chunk
//     must equal [StepChunk], or the window bytes proven against the job's
//     data roots ([WindowSpans] says which);
//   - store: the state-file chunk must equal [NextStateChunk] built from
//     the agreed outputs (a tensor chunk proven against its writer's root,
//     or the header from the config, the step and the proven loss);
//   - operator: the provider reveals its chunk's bytes; the challenger
//     points at one element and gives the input slices it reads
//     ([Step.ElementOpenings]), each a 4 KiB chunk proven against an
//     agreed input root; [Step.EvalElement] recomputes the element with
//     exact's own kernel (exact.Graph.EvalRegion) and the referee compares.
//
// The element, not the chunk, is the referee's unit: a 4 KiB chunk of a
// matmul's output reads up to 1,024 rows of B, one element reads one row of
// A and one of B. [WorstCase] bounds a move's bytes and work from the graph
// alone, so params can be checked against a block gas limit without running
// a step.
package tiles

// Package exact is depinchain's exact transformer workload (workload kind
// "transformer"): a byte-level GPT-style decoder trained with AdamW in
// integer arithmetic whose results do not depend on the order of any
// reduction, so Go on any GOMAXPROCS, PyTorch on CPU or CUDA (package
// torch/ in this directory) and torch.distributed data-parallel runs all
// produce the same bits. docs/exact-arithmetic.md is the specification;
// this package is its reference implementation, which the chain's referee
// and the provider sidecar run.
//
// # Configuration
//
// [Config] holds the job spec's workload.model and workload.train fields
// (YAML/JSON keys layers, d_model, heads, d_ff, context, vocab; batch,
// micro_batch, optimizer, lr, warmup_steps, decay_steps, min_lr,
// weight_decay, beta1, beta2, eps, init_std, norm_eps).
// [Config.Validate] reports every invalid field by path
// ("model.d_model: must be divisible by model.heads (256 vs 3)");
// [Config.CheckLimits] checks a chain's [Limits] (parameters, tokens per
// step, longest operator row, multiply-accumulates per step, state bytes,
// layers). [Config.ParamCount], [Config.TokensPerStep],
// [Config.MACsPerStep] (exact, for gas) and [Config.ElementsPerStep] size
// a job without building anything. [Config.Hyper] is the integer form a
// state commits to.
//
// # State and hashes
//
//	s, err := exact.Init(cfg, seed)       // weights from SHA-256 counters of the seed
//	b := s.Encode()                       // the canonical state file
//	h := s.Root()                         // h_i = Merkle root of b in 4 KiB chunks = state_root
//	s2, err := exact.Decode(b)            // rejects anything non-canonical
//
// The header carries the config, the step and the loss (Q30 nats) of the
// step that produced the state, so h_i commits to the loss curve.
//
// # Training
//
//	ws, _ := exact.BatchWindows(cfg, seed, s.Step, uint64(len(stream))) // data of step s.Step
//	batch, _ := exact.Batch(stream, ws)                                 // or exact.StepBatch
//	next, info, err := exact.Step(s, batch)                             // info.Loss, info.Root
//
// [Train] runs a whole job in the trainer-contract layout
// (provider/trainer/CONTRACT.md): checkpoints/step-N/{state,trace.txt,
// COMPLETE}, metrics.jsonl and DONE; resuming from any checkpoint
// continues with the hashes of an uninterrupted run. [ReadStreamDir] reads
// a data directory as the stream (the PyTorch trainer reads it the same
// way).
//
// # The operator graph
//
// [TrainGraph] is one step as an ordered list of single-output operators
// ([Op]: index, kind, input and output tensor ids, integer attributes,
// phase, micro-batch) over named tensors ([TensorSpec]: dtype, shape,
// fixed-point position). [Executor] runs it, splitting each operator's
// output over goroutines, and shows every output to an [Observer] — the
// hook for per-operator records: [Executor.StepRecords] returns
// (index, kind, input roots, output root) for every operator, and
// [Tensor.ChunkProof] opens one 4 KiB chunk of a tensor against its
// [Tensor.Root]. Each operator kind has one kernel that computes any
// rectangle of its output from a [Source] of input rows;
// [Graph.ChunkNeeds] lists the input rectangles one 4 KiB output chunk
// depends on and [Graph.EvalChunk] recomputes that chunk from just those
// (a [SparseSource]) with the same code the full executor runs — what a
// tile referee needs. [ForwardGraph] and [Forward] are the inference pass.
//
// # Models in and out
//
// [Generate] samples text with the exact forward pass and a seeded,
// deterministic sampler. [Export] writes model.safetensors (float32
// weights) and a Hugging Face-style config.json that
// torch/float_model.py loads into a plain PyTorch model;
// [ImportSafetensors] quantizes given float weights into a step-0 state
// (fine-tuning is a job like pretraining).
package exact

package traindata

import _ "embed" // the built-in corpus

//go:embed corpus.txt
var builtinCorpus string

// BuiltinCorpus returns a copy of the small English corpus (printable ASCII prose about
// distributed training and blockchains) that jobs naming no dataset train on; the sidecar
// writes it into DEPIN_DATA_DIR as corpus.txt.
func BuiltinCorpus() []byte { return []byte(builtinCorpus) }

package statusv1_test

import (
	"testing"

	"cosmossdk.io/log"
	dbm "github.com/cosmos/cosmos-db"
	simtestutil "github.com/cosmos/cosmos-sdk/testutil/sims"
	gogoproto "github.com/cosmos/gogoproto/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/depinchain/depinchain/app"
	"github.com/depinchain/depinchain/pkg/chainparams"
	statusv1 "github.com/depinchain/depinchain/provider/status/v1"
)

// The status API is plain google protobuf while the chain's types are
// gogoproto: both end up in one binary when a tool links the app and the
// sidecar's API, and the SDK merges gogoproto's registry with protobuf-go's.
// Importing both must not panic, the merge must not conflict, and the app
// must still build.
func TestRegistersBesideTheApp(t *testing.T) {
	fd, err := protoregistry.GlobalFiles.FindFileByPath("depinchain/provider/v1/status.proto")
	if err != nil {
		t.Fatalf("status.proto not in protobuf-go's registry: %v", err)
	}
	if fd != statusv1.File_depinchain_provider_v1_status_proto {
		t.Fatal("a different status.proto is registered")
	}

	merged, err := gogoproto.MergedRegistry()
	if err != nil {
		t.Fatalf("merging gogoproto's and protobuf-go's registries: %v", err)
	}
	for _, name := range []protoreflect.FullName{
		"depinchain.provider.v1.StatusService",
		"depinchain.market.v1.Query",
		"depinchain.verify.v1.Msg",
	} {
		if _, err := merged.FindDescriptorByName(name); err != nil {
			t.Errorf("%s not in the merged registry: %v", name, err)
		}
	}

	chainparams.SetAddressPrefixes()
	a := app.New(log.NewNopLogger(), dbm.NewMemDB(), nil, true, simtestutil.EmptyAppOptions{})
	if a.InterfaceRegistry() == nil {
		t.Fatal("app without an interface registry")
	}
}

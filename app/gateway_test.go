package app

import (
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"

	gogoproto "github.com/cosmos/gogoproto/proto"
	protov1 "github.com/golang/protobuf/proto" //nolint:staticcheck // the gateway's own message type
	"github.com/grpc-ecosystem/grpc-gateway/runtime"
	"github.com/grpc-ecosystem/grpc-gateway/utilities"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// enumParam is one enum-typed field of a Query request, as a query parameter.
type enumParam struct {
	method  string
	request protoreflect.FullName
	field   protoreflect.FieldDescriptor
	// enum is the field's enum. gogoproto builds its descriptors allowing
	// unresolved imports, so field.Enum() may be a placeholder: the enum is
	// looked up by name.
	enum protoreflect.EnumDescriptor
}

// enumQueryParams lists every enum-typed top-level field of every request of
// every depinchain Query service: the query parameters that must take names.
func enumQueryParams(t *testing.T) []enumParam {
	t.Helper()
	var params []enumParam
	gogoproto.GogoResolver.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		if !strings.HasPrefix(string(fd.Package()), gatewayProtoPackage) {
			return true
		}
		for i := 0; i < fd.Services().Len(); i++ {
			svc := fd.Services().Get(i)
			if svc.Name() != "Query" {
				continue
			}
			for j := 0; j < svc.Methods().Len(); j++ {
				m := svc.Methods().Get(j)
				fields := m.Input().Fields()
				for k := 0; k < fields.Len(); k++ {
					f := fields.Get(k)
					if f.Kind() != protoreflect.EnumKind || f.IsList() {
						continue
					}
					d, err := gogoproto.GogoResolver.FindDescriptorByName(f.Enum().FullName())
					enum, ok := d.(protoreflect.EnumDescriptor)
					if err != nil || !ok {
						t.Fatalf("%s: enum %s of %s: %v", m.FullName(), f.Enum().FullName(), f.Name(), err)
					}
					params = append(params, enumParam{method: string(m.FullName()), request: m.Input().FullName(), field: f, enum: enum})
				}
			}
		}
		return true
	})
	return params
}

// parseQuery runs the gateway's query parser on a fresh request message.
func parseQuery(t *testing.T, p enumParam, value string) (protov1.Message, error) {
	t.Helper()
	typ := gogoproto.MessageType(string(p.request))
	if typ == nil {
		t.Fatalf("%s: no Go type for %s", p.method, p.request)
	}
	msg, ok := reflect.New(typ.Elem()).Interface().(protov1.Message)
	if !ok {
		t.Fatalf("%s is not a proto message", typ)
	}
	return msg, runtime.PopulateQueryParameters(msg, url.Values{string(p.field.Name()): {value}}, utilities.NewDoubleArray(nil))
}

// enumValue reads the field back from the message, as a number.
func enumValue(t *testing.T, msg protov1.Message, p enumParam) int32 {
	t.Helper()
	v := reflect.ValueOf(msg).Elem()
	for i := 0; i < v.NumField(); i++ {
		tag := v.Type().Field(i).Tag.Get("protobuf")
		if strings.Contains(tag, ",name="+string(p.field.Name())+",") {
			return int32(v.Field(i).Int())
		}
	}
	t.Fatalf("%T has no field %s", msg, p.field.Name())
	return 0
}

func TestGatewayEnumQueryParameters(t *testing.T) {
	params := enumQueryParams(t)
	// At least market's jobs?state= and stakingext's providers?status=.
	want := map[string]bool{"depinchain.market.v1.Query.Jobs": false, "depinchain.stakingext.v1.Query.Providers": false}
	for _, p := range params {
		if _, ok := want[p.method]; ok {
			want[p.method] = true
		}
	}
	for m, found := range want {
		if !found {
			t.Fatalf("no enum query parameter found on %s; found %d: %v", m, len(params), params)
		}
	}

	// Before the registration the gateway reads names as integers and
	// refuses them (the bug this fixes). Only checked when nothing in this
	// test binary registered the files first.
	if _, err := protoregistry.GlobalFiles.FindFileByPath("depinchain/market/v1/market.proto"); err != nil {
		p := params[0]
		if _, err := parseQuery(t, p, string(p.enum.Values().Get(1).Name())); err == nil {
			t.Fatalf("%s: the gateway took an enum name before registration; the premise of gateway.go is wrong", p.method)
		}
	}
	if err := gatewayEnumsOnce(); err != nil {
		t.Fatal(err)
	}
	if err := registerGatewayEnums(); err != nil {
		t.Fatalf("registering twice: %v", err)
	}

	for _, p := range params {
		values := p.enum.Values()
		for i := 0; i < values.Len(); i++ {
			ev := values.Get(i)
			byName, err := parseQuery(t, p, string(ev.Name()))
			if err != nil {
				t.Fatalf("%s ?%s=%s: %v", p.method, p.field.Name(), ev.Name(), err)
			}
			byNumber, err := parseQuery(t, p, strconv.Itoa(int(ev.Number())))
			if err != nil {
				t.Fatalf("%s ?%s=%d: %v", p.method, p.field.Name(), ev.Number(), err)
			}
			if got, num := enumValue(t, byName, p), enumValue(t, byNumber, p); got != int32(ev.Number()) || num != got {
				t.Errorf("%s ?%s: %s reads as %d, %d reads as %d", p.method, p.field.Name(), ev.Name(), got, ev.Number(), num)
			}
		}
		for _, bad := range []string{"NOT_A_" + string(p.enum.Name()), strconv.Itoa(values.Len() + 100), "open"} {
			if _, err := parseQuery(t, p, bad); err == nil || !strings.Contains(err.Error(), "is not a valid") {
				t.Errorf("%s ?%s=%s: err = %v, want \"is not a valid\"", p.method, p.field.Name(), bad, err)
			}
		}
	}
}

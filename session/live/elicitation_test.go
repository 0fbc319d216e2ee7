package live

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp"
	"github.com/berth-sh/berth/store/memory"
)

// The agent's requests are checked before anything is stored: a bad mode,
// URL or schema is an invalid-params error to the agent; a session holds
// at most MaxPendingElicitations at once.
func TestElicitationRequestsAreBounded(t *testing.T) {
	gate := &elicitationGate{Store: memory.New(), open: make(chan struct{})}
	hs := newHarness(t, func(h *Host) { h.Store = gate })
	var opened sync.Once
	release := func() { opened.Do(func() { close(gate.open) }) }
	t.Cleanup(release)
	ctx := context.Background()
	ls := hs.start()
	h := ls.conv.handler
	huge := `{"type":"object","properties":{"a":{"type":"string","description":"` + strings.Repeat("x", berth.MaxElicitationSchemaBytes) + `"}}}`
	for _, bad := range []acp.CreateElicitationRequest{
		{Mode: "telepathy", Message: "?"},
		{Mode: "url", Message: "open", URL: "javascript:alert(1)"},
		{Mode: "url", Message: "open", URL: "file:///etc/passwd"},
		{Mode: "form", Message: "?", RequestedSchema: json.RawMessage(huge)},
		{Mode: "form", Message: "?", RequestedSchema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"object"}}}`)},
		{Mode: "form", Message: strings.Repeat("m", berth.MaxElicitationMessageBytes+1)},
	} {
		_, err := h.CreateElicitation(ctx, bad)
		var rpcErr *acp.Error
		if !errors.As(err, &rpcErr) || rpcErr.Code != acp.CodeInvalidParams {
			t.Fatalf("request %.60q: %v, want invalid params", bad.Mode+" "+bad.URL, err)
		}
	}
	if es, _ := hs.store.ListElicitations(ctx, ls.ID(), ""); len(es) != 0 {
		t.Fatalf("refused requests were stored: %+v", es)
	}

	// More requests than the cap at once, each held in the store: the cap
	// holds while they are on their way in, the rest are refused.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	const extra = 4
	answers := make(chan acp.CreateElicitationResponse, berth.MaxPendingElicitations+extra)
	refused := make(chan error, berth.MaxPendingElicitations+extra)
	for range berth.MaxPendingElicitations + extra {
		go func() {
			resp, err := h.CreateElicitation(wctx, acp.CreateElicitationRequest{Mode: "url", Message: "sign in",
				URL: "https://example.com/login", ElicitationID: "acp-1"})
			if err != nil {
				refused <- err
				return
			}
			answers <- resp
		}()
	}
	waitFor(t, "the requests over the cap refused", func() bool { return len(refused) == extra })
	release()
	for range extra {
		var rpcErr *acp.Error
		if err := <-refused; !errors.As(err, &rpcErr) || rpcErr.Code != acp.CodeInvalidRequest {
			t.Fatalf("a request over the cap: %v", err)
		}
	}
	waitFor(t, "every elicitation pending", func() bool {
		return ls.View().PendingElicitations == berth.MaxPendingElicitations
	})
	if _, err := h.CreateElicitation(ctx, acp.CreateElicitationRequest{Mode: "form", Message: "one more"}); err == nil {
		t.Fatal("a request over the cap was served")
	}
	es, _ := hs.store.ListElicitations(ctx, ls.ID(), berth.ElicitationPending)
	if len(es) != berth.MaxPendingElicitations || es[0].URL != "https://example.com/login" || es[0].ACPElicitationID != "acp-1" || es[0].Mode != "url" {
		t.Fatalf("pending: %d, first %+v", len(es), es[0])
	}
	if _, err := ls.ResolveElicitation(ctx, es[0].ID, berth.ElicitationAccept, nil, berth.DecidedByUser); err != nil {
		t.Fatal(err)
	}
	if resp := <-answers; resp.Action != berth.ElicitationAccept {
		t.Fatalf("agent got %+v", resp)
	}
	// The connection's end (here the requests' context) cancels the rest.
	cancel()
	for range berth.MaxPendingElicitations - 1 {
		if resp := <-answers; resp.Action != berth.ElicitationCancel {
			t.Fatalf("agent got %+v", resp)
		}
	}
	if got := ls.View(); got.PendingElicitations != 0 || got.Badge != berth.BadgeIdle {
		t.Fatalf("session after: %+v", got)
	}
}

// elicitationGate is a store whose CreateElicitation waits until open is
// closed (the refused requests before the cap test's requests are stored).
type elicitationGate struct {
	berth.Store
	open chan struct{}
}

func (g *elicitationGate) CreateElicitation(ctx context.Context, e *berth.Elicitation) error {
	<-g.open
	return g.Store.CreateElicitation(ctx, e)
}

// An agent's url and ids, which the record, its events and every list
// keep, are bounded like its message: over the bound is invalid params,
// and nothing is stored.
func TestElicitationURLAndIDsAreBounded(t *testing.T) {
	hs := newHarness(t)
	ctx := context.Background()
	ls := hs.start()
	h := ls.conv.handler
	for _, bad := range []acp.CreateElicitationRequest{
		{Mode: "url", Message: "open", URL: "https://example.com/" + strings.Repeat("u", berth.MaxElicitationURLBytes)},
		{Mode: "url", Message: "open", URL: "https://example.com/", ElicitationID: strings.Repeat("i", berth.MaxElicitationIDBytes+1)},
		{Mode: "form", Message: "?", ToolCallID: strings.Repeat("t", berth.MaxElicitationIDBytes+1)},
	} {
		// One taken by mistake would wait for an answer: not forever.
		bctx, stop := context.WithTimeout(ctx, 30*time.Second)
		_, err := h.CreateElicitation(bctx, bad)
		stop()
		var rpcErr *acp.Error
		if !errors.As(err, &rpcErr) || rpcErr.Code != acp.CodeInvalidParams {
			t.Errorf("url of %d bytes, ids of %d and %d bytes: %v, want invalid params", len(bad.URL), len(bad.ElicitationID), len(bad.ToolCallID), err)
		}
	}
	if es, _ := hs.store.ListElicitations(ctx, ls.ID(), ""); len(es) != 0 {
		t.Fatalf("refused requests were stored: %d", len(es))
	}
}

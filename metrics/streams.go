package metrics

import (
	"context"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-sh/berth"
)

// CountStreams returns svc with its event streams counted in the
// berth_sse_subscribers gauge while they are open: give it to the API
// server, so that the streams it serves are counted and nothing else's.
func (m *Metrics) CountStreams(svc berth.SessionService) berth.SessionService {
	return &countingService{SessionService: svc, m: m}
}

// countingService is a berth.SessionService that counts its open streams.
type countingService struct {
	berth.SessionService
	m *Metrics
}

// StreamEvents implements berth.SessionService.
func (s *countingService) StreamEvents(ctx context.Context, id string, after int64) (berth.EventStream, error) {
	st, err := s.SessionService.StreamEvents(ctx, id, after)
	if err != nil {
		return nil, err
	}
	s.m.sessionStreams.Inc()
	return &countedEvents{EventStream: st, gone: countedGone(s.m.sessionStreams)}, nil
}

// StreamChanges implements berth.SessionService.
func (s *countingService) StreamChanges(ctx context.Context, lastEventID string) (berth.ChangeStream, error) {
	st, err := s.SessionService.StreamChanges(ctx, lastEventID)
	if err != nil {
		return nil, err
	}
	s.m.changeStreams.Inc()
	return &countedChanges{ChangeStream: st, gone: countedGone(s.m.changeStreams)}, nil
}

// countedGone returns what takes a stream off g, once however often it
// is called.
func countedGone(g prometheus.Gauge) func() {
	var once sync.Once
	return func() { once.Do(g.Dec) }
}

// countedEvents is an event stream counted until it is closed.
type countedEvents struct {
	berth.EventStream
	gone func()
}

// Close implements berth.EventStream.
func (s *countedEvents) Close() {
	s.EventStream.Close()
	s.gone()
}

// countedChanges is a change stream counted until it is closed.
type countedChanges struct {
	berth.ChangeStream
	gone func()
}

// Close implements berth.ChangeStream.
func (s *countedChanges) Close() {
	s.ChangeStream.Close()
	s.gone()
}

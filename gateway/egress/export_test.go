package egress

// Waiting returns how many connections wait for the question pending
// about host:port (0 when none is).
func Waiting(s *Session, host string, port int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q := s.asking[target{host, port}]; q != nil {
		return q.waiting
	}
	return 0
}

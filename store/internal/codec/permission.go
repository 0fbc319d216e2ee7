package codec

import "github.com/berth-sh/berth"

// CheckDecision is EInvalid unless p names a permission of a session and
// moves it out of pending.
func CheckDecision(p *berth.Permission) error {
	if p == nil || p.ID == "" || p.SessionID == "" {
		return berth.Errorf(berth.EInvalid, "permission needs an id and a session id")
	}
	if p.State == "" || p.State == berth.PermissionPending {
		return berth.Errorf(berth.EInvalid, "a decision must move permission %s out of pending", p.ID)
	}
	return nil
}

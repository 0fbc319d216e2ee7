package codec

import (
	"encoding/json"

	"github.com/berth-sh/berth"
)

// CheckElicitation is what every store refuses of an elicitation it is
// given to create: EInvalid without an id or a session, or for a schema
// that is not JSON.
func CheckElicitation(e *berth.Elicitation) error {
	if e == nil || e.ID == "" || e.SessionID == "" {
		return berth.Errorf(berth.EInvalid, "elicitation needs an id and a session id")
	}
	if e.RequestedSchema != nil && !json.Valid(e.RequestedSchema) {
		return berth.Errorf(berth.EInvalid, "elicitation requested_schema is not JSON")
	}
	return nil
}

// CheckResolution is EInvalid unless e names an elicitation and moves it
// out of pending.
func CheckResolution(e *berth.Elicitation) error {
	if e == nil || e.ID == "" || e.SessionID == "" {
		return berth.Errorf(berth.EInvalid, "elicitation needs an id and a session id")
	}
	if e.State == "" || e.State == berth.ElicitationPending {
		return berth.Errorf(berth.EInvalid, "a resolution must move elicitation %s out of pending", e.ID)
	}
	return nil
}

// NewElicitation checks an elicitation to create (CheckElicitation) and
// returns the copy to store, whose empty State is pending, and its
// document.
func NewElicitation(e *berth.Elicitation) (*berth.Elicitation, string, error) {
	if err := CheckElicitation(e); err != nil {
		return nil, "", err
	}
	c := *e
	if c.State == "" {
		c.State = berth.ElicitationPending
	}
	doc, err := EncodeElicitation(&c)
	if err != nil {
		return nil, "", err
	}
	return &c, doc, nil
}

// Resolved is the document of the stored elicitation doc once e's
// resolution is on it: its State, Action, Content, DecidedBy and
// ResolvedAt.
func Resolved(doc []byte, e *berth.Elicitation) (string, error) {
	stored, err := DecodeElicitation(doc)
	if err != nil {
		return "", err
	}
	stored.State, stored.Action, stored.Content, stored.DecidedBy, stored.ResolvedAt = e.State, e.Action, e.Content, e.DecidedBy, e.ResolvedAt
	return EncodeElicitation(stored)
}

// EncodeElicitation is the stored document of an elicitation. EInvalid
// for content that cannot be encoded.
func EncodeElicitation(e *berth.Elicitation) (string, error) {
	b, err := json.Marshal(e)
	if err != nil {
		return "", berth.WrapError(berth.EInvalid, err, "elicitation cannot be encoded")
	}
	return string(b), nil
}

// DecodeElicitation is the inverse of EncodeElicitation. EInternal for a
// document that does not decode.
func DecodeElicitation(doc []byte) (*berth.Elicitation, error) {
	e := new(berth.Elicitation)
	if err := json.Unmarshal(doc, e); err != nil {
		return nil, berth.WrapError(berth.EInternal, err, "decode stored elicitation")
	}
	return e, nil
}

// ScanSessionElicitation reads a row of a session's id, then an
// elicitation's document (the recovery's read of every session's).
func ScanSessionElicitation(row Row) (string, *berth.Elicitation, error) {
	var id string
	var doc []byte
	if err := row.Scan(&id, &doc); err != nil {
		return "", nil, err
	}
	e, err := DecodeElicitation(doc)
	return id, e, err
}

// ResolvedConflict is the EConflict of a resolution of an elicitation
// that is no longer pending.
func ResolvedConflict(id, state string) error {
	return &berth.Error{Code: berth.EConflict,
		Message: "elicitation " + id + " is " + state + ", not " + berth.ElicitationPending,
		Details: map[string]any{"state": state, "expected": berth.ElicitationPending}}
}

package acp

import (
	"encoding/json"
	"fmt"
)

// JSON-RPC and ACP error codes.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternal       = -32603
	// CodeAuthRequired is ACP's "authentication required".
	CodeAuthRequired = -32000
	// CodeResourceNotFound is ACP's "resource not found".
	CodeResourceNotFound = -32002
)

// Error is a JSON-RPC error object.
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Error implements error.
func (e *Error) Error() string { return fmt.Sprintf("acp error %d: %s", e.Code, e.Message) }

// MethodNotFound returns the error for a method this side does not serve.
func MethodNotFound(method string) *Error {
	return &Error{Code: CodeMethodNotFound, Message: "method not found: " + method}
}

// InvalidParams returns the error for params that do not decode.
func InvalidParams(err error) *Error {
	return &Error{Code: CodeInvalidParams, Message: "invalid params: " + err.Error()}
}

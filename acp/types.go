package acp

import "encoding/json"

// ProtocolVersion is the ACP major version berth speaks.
const ProtocolVersion = 1

// Method names.
const (
	MethodInitialize        = "initialize"
	MethodAuthenticate      = "authenticate"
	MethodSessionNew        = "session/new"
	MethodSessionLoad       = "session/load"
	MethodSessionResume     = "session/resume"
	MethodSessionPrompt     = "session/prompt"
	MethodSessionCancel     = "session/cancel"
	MethodSessionUpdate     = "session/update"
	MethodRequestPermission = "session/request_permission"
	MethodReadTextFile      = "fs/read_text_file"
	MethodWriteTextFile     = "fs/write_text_file"
	MethodTerminalCreate    = "terminal/create"
	MethodTerminalOutput    = "terminal/output"
	MethodTerminalWait      = "terminal/wait_for_exit"
	MethodTerminalKill      = "terminal/kill"
	MethodTerminalRelease   = "terminal/release"
)

// FsCapabilities says which fs methods the client serves.
type FsCapabilities struct {
	ReadTextFile  bool `json:"readTextFile"`
	WriteTextFile bool `json:"writeTextFile"`
}

// ClientCapabilities is what berth advertises in initialize.
type ClientCapabilities struct {
	Fs       FsCapabilities `json:"fs"`
	Terminal bool           `json:"terminal"`
	// Elicitation offers elicitation/create's modes.
	Elicitation *ElicitationCapabilities `json:"elicitation,omitempty"`
}

// Implementation names a client or agent program.
type Implementation struct {
	Name    string `json:"name"`
	Title   string `json:"title,omitempty"`
	Version string `json:"version"`
}

// InitializeRequest opens the protocol.
type InitializeRequest struct {
	ProtocolVersion    int                `json:"protocolVersion"`
	ClientCapabilities ClientCapabilities `json:"clientCapabilities"`
	ClientInfo         *Implementation    `json:"clientInfo,omitempty"`
}

// AgentCapabilities is the part of the agent's capabilities berth acts on;
// Raw keeps all of it.
type AgentCapabilities struct {
	LoadSession         bool            `json:"loadSession"`
	McpCapabilities     McpCapabilities `json:"mcpCapabilities"`
	SessionCapabilities struct {
		Resume json.RawMessage `json:"resume,omitempty"`
		Fork   json.RawMessage `json:"fork,omitempty"`
	} `json:"sessionCapabilities"`
}

// InitializeResponse is the agent's answer to initialize.
type InitializeResponse struct {
	ProtocolVersion   int             `json:"protocolVersion"`
	AgentCapabilities json.RawMessage `json:"agentCapabilities,omitempty"`
	AgentInfo         json.RawMessage `json:"agentInfo,omitempty"`
	AuthMethods       json.RawMessage `json:"authMethods,omitempty"`
}

// Capabilities decodes the capabilities berth acts on.
func (r *InitializeResponse) Capabilities() AgentCapabilities {
	var c AgentCapabilities
	if len(r.AgentCapabilities) > 0 {
		_ = json.Unmarshal(r.AgentCapabilities, &c)
	}
	return c
}

// CanResume reports whether the agent advertises session/resume.
func (c AgentCapabilities) CanResume() bool {
	return len(c.SessionCapabilities.Resume) > 0 && string(c.SessionCapabilities.Resume) != "null"
}

// NewSessionRequest creates an ACP session.
type NewSessionRequest struct {
	Cwd        string      `json:"cwd"`
	McpServers []McpServer `json:"mcpServers"`
}

// NewSessionResponse answers session/new.
type NewSessionResponse struct {
	SessionID string `json:"sessionId"`
	// SessionSetup is the modes, models and config options it offers.
	SessionSetup
}

// LoadSessionRequest reopens a stored ACP session (session/load) or resumes
// one (session/resume): both take the same fields.
type LoadSessionRequest struct {
	SessionID  string      `json:"sessionId"`
	Cwd        string      `json:"cwd"`
	McpServers []McpServer `json:"mcpServers"`
}

// ContentBlock is a piece of content (ACP ContentBlock): text, image,
// audio, resource (an embedded resource) or resource_link. berth reads
// text blocks from the agent and keeps the rest raw; it sends any kind.
type ContentBlock struct {
	Type string `json:"type"`
	Text string `json:"text,omitempty"`
	// MimeType and Data are an image's or audio's; MimeType also a link's.
	MimeType string `json:"mimeType,omitempty"`
	Data     string `json:"data,omitempty"`
	// URI and Name are a resource_link's (URI also an image's source).
	URI  string `json:"uri,omitempty"`
	Name string `json:"name,omitempty"`
	// Resource is an embedded resource's contents.
	Resource *ResourceContents `json:"resource,omitempty"`
}

// ResourceContents is an embedded resource: Text or Blob (base64).
type ResourceContents struct {
	URI      string `json:"uri"`
	MimeType string `json:"mimeType,omitempty"`
	Text     string `json:"text,omitempty"`
	Blob     string `json:"blob,omitempty"`
}

// PromptCapabilities says which content kinds beyond text and
// resource_link an agent takes in a prompt.
type PromptCapabilities struct {
	Image           bool `json:"image"`
	Audio           bool `json:"audio"`
	EmbeddedContext bool `json:"embeddedContext"`
}

// PromptCapabilitiesOf reads promptCapabilities from the agent's raw
// capabilities (all false when absent).
func PromptCapabilitiesOf(raw json.RawMessage) PromptCapabilities {
	var c struct {
		PromptCapabilities PromptCapabilities `json:"promptCapabilities"`
	}
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &c)
	}
	return c.PromptCapabilities
}

// AuthenticateRequest asks the agent to authenticate with one of the
// methods it advertised in initialize.
type AuthenticateRequest struct {
	MethodID string `json:"methodId"`
}

// AuthMethod is the part of an advertised auth method berth acts on.
type AuthMethod struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// AuthMethodsOf decodes an agent's raw authMethods (nil when absent).
func AuthMethodsOf(raw json.RawMessage) []AuthMethod {
	var ms []AuthMethod
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &ms)
	}
	return ms
}

// TextBlock returns a text content block.
func TextBlock(s string) ContentBlock { return ContentBlock{Type: "text", Text: s} }

// PromptRequest is one turn's input.
type PromptRequest struct {
	SessionID string         `json:"sessionId"`
	Prompt    []ContentBlock `json:"prompt"`
}

// PromptResponse ends a turn.
type PromptResponse struct {
	StopReason string          `json:"stopReason"`
	Usage      json.RawMessage `json:"usage,omitempty"`
}

// CancelNotification asks the agent to end the turn in flight.
type CancelNotification struct {
	SessionID string `json:"sessionId"`
}

// SessionNotification carries one session/update.
type SessionNotification struct {
	SessionID string          `json:"sessionId"`
	Update    json.RawMessage `json:"update"`
}

// PermissionOption is one choice in a permission request.
type PermissionOption struct {
	OptionID string `json:"optionId"`
	Name     string `json:"name"`
	Kind     string `json:"kind"`
}

// RequestPermissionRequest asks the client to allow a tool call.
type RequestPermissionRequest struct {
	SessionID string             `json:"sessionId"`
	ToolCall  json.RawMessage    `json:"toolCall"`
	Options   []PermissionOption `json:"options"`
}

// ToolCallKind returns the ACP tool kind of the request's tool call.
func (r *RequestPermissionRequest) ToolCallKind() string {
	var tc struct {
		Kind string `json:"kind"`
	}
	_ = json.Unmarshal(r.ToolCall, &tc)
	return tc.Kind
}

// PermissionOutcome is the decision: "selected" with an option, or "cancelled".
type PermissionOutcome struct {
	Outcome  string `json:"outcome"`
	OptionID string `json:"optionId,omitempty"`
}

// RequestPermissionResponse answers a permission request.
type RequestPermissionResponse struct {
	Outcome PermissionOutcome `json:"outcome"`
}

// Selected returns the answer that picks option id.
func Selected(id string) RequestPermissionResponse {
	return RequestPermissionResponse{Outcome: PermissionOutcome{Outcome: "selected", OptionID: id}}
}

// Cancelled returns the answer for a request whose turn was cancelled.
func Cancelled() RequestPermissionResponse {
	return RequestPermissionResponse{Outcome: PermissionOutcome{Outcome: "cancelled"}}
}

// ReadTextFileRequest asks for a text file's content.
type ReadTextFileRequest struct {
	SessionID string `json:"sessionId"`
	Path      string `json:"path"`
	Line      *int   `json:"line,omitempty"`
	Limit     *int   `json:"limit,omitempty"`
}

// ReadTextFileResponse returns it.
type ReadTextFileResponse struct {
	Content string `json:"content"`
}

// WriteTextFileRequest writes a text file.
type WriteTextFileRequest struct {
	SessionID string `json:"sessionId"`
	Path      string `json:"path"`
	Content   string `json:"content"`
}

// EnvVariable is one environment variable for a terminal.
type EnvVariable struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// CreateTerminalRequest starts a command.
type CreateTerminalRequest struct {
	SessionID       string        `json:"sessionId"`
	Command         string        `json:"command"`
	Args            []string      `json:"args,omitempty"`
	Env             []EnvVariable `json:"env,omitempty"`
	Cwd             string        `json:"cwd,omitempty"`
	OutputByteLimit *int          `json:"outputByteLimit,omitempty"`
}

// CreateTerminalResponse names the terminal.
type CreateTerminalResponse struct {
	TerminalID string `json:"terminalId"`
}

// TerminalRequest addresses one terminal (output, wait, kill, release).
type TerminalRequest struct {
	SessionID  string `json:"sessionId"`
	TerminalID string `json:"terminalId"`
}

// TerminalExitStatus is how a terminal's command ended.
type TerminalExitStatus struct {
	ExitCode *int    `json:"exitCode"`
	Signal   *string `json:"signal"`
}

// TerminalOutputResponse is a terminal's output so far.
type TerminalOutputResponse struct {
	Output     string              `json:"output"`
	Truncated  bool                `json:"truncated"`
	ExitStatus *TerminalExitStatus `json:"exitStatus,omitempty"`
}

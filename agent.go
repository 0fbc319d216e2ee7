package berth

// AgentSpec is one entry of the agent catalog: how to start an ACP agent.
type AgentSpec struct {
	Name        string            `json:"name" toml:"name"`
	Command     string            `json:"command" toml:"command"`
	Args        []string          `json:"args,omitempty" toml:"args"`
	Env         map[string]string `json:"-" toml:"env"`
	Description string            `json:"description" toml:"description"`
	DockerImage string            `json:"docker_image,omitempty" toml:"docker_image"`
	PassEnv     []string          `json:"pass_env,omitempty" toml:"pass_env"`
	HomeFiles   []string          `json:"home_files,omitempty" toml:"home_files"`
	Network     bool              `json:"network,omitempty" toml:"network"`
	// ModelAPI is the kind of model API the agent calls (anthropic,
	// openai, openai-responses, gemini): berth points it at its model
	// gateway's upstream of that kind (docs/api.md, The model gateway).
	// "" or ModelAPINone: it is given none.
	ModelAPI string `json:"model_api,omitempty" toml:"model_api"`
	// ModelEnv are more variables that point the agent at the model
	// gateway, for an agent that reads its endpoint from its own
	// configuration rather than the ModelAPI kind's usual variables: in
	// each value "{url}" becomes the URL its SDK is given (what
	// OPENAI_BASE_URL holds for openai) and "{key}" the session's
	// placeholder key. They are set only when the agent is pointed at the
	// gateway, and win as its variables do (docs/api.md, The model
	// gateway).
	ModelEnv map[string]string `json:"model_env,omitempty" toml:"model_env"`
	// SelfDecidingModes are the agent's own modes in which it answers
	// permissions by itself, and AskingMode the one in which it asks
	// berth: a session whose agent is in one of the former is put in the
	// latter (docs/api.md, "Agent controls").
	SelfDecidingModes []string `json:"self_deciding_modes,omitempty" toml:"self_deciding_modes"`
	AskingMode        string   `json:"asking_mode,omitempty" toml:"asking_mode"`
}

// ModelAPINone is an AgentSpec.ModelAPI that gives the agent no model
// gateway (a [[agents]] override of a built-in that has one).
const ModelAPINone = "none"

// AgentInfo is an agent catalog entry as GET /v1/agents shows it.
type AgentInfo struct {
	Name    string `json:"name"`
	Command string `json:"command"`
	// Args are the arguments the command runs with.
	Args      []string `json:"args"`
	Available bool     `json:"available"`
	// Package is the npm package an npx agent runs, and Fetch says that it
	// is neither installed nor in npx's cache: the first session downloads
	// it from the npm registry.
	Package string `json:"package,omitempty"`
	Fetch   bool   `json:"fetch,omitempty"`
	// Installed says that the npx agent's package is in the daemon's own
	// npm prefix (`berth agents install`): its sessions run it from there,
	// without npx.
	Installed   bool   `json:"installed,omitempty"`
	Description string `json:"description"`
	// ModelAPI is the kind of model API the agent calls (AgentSpec's); ""
	// when it calls none through berth.
	ModelAPI string `json:"model_api,omitempty"`
	// Credential names the credential its default upstream needs
	// (docs/api.md, The model gateway), and CredentialSet says whether it
	// is set; both empty when the upstream needs none or there is no
	// model gateway.
	Credential    string `json:"credential,omitempty"`
	CredentialSet bool   `json:"credential_set,omitempty"`
}

// Health is the answer of GET /v1/health.
type Health struct {
	Status  string `json:"status"`
	Version string `json:"version"`
	Store   string `json:"store"`
	NodeID  string `json:"node_id"`
	// Sandboxes are the providers that work here; Probing those whose
	// probe, made once at the daemon's start, has not answered yet (health
	// does not wait for it: a create does).
	Sandboxes []string `json:"sandboxes,omitempty"`
	Probing   []string `json:"probing,omitempty"`
	// Reattaching counts the sessions a booting daemon found live and is
	// still reattaching (each answers once its own reattach is done).
	Reattaching int `json:"reattaching,omitempty"`
	// Storage is how far behind the object store is (docs/api.md,
	// "Session state in an object store"); nil without [storage] url.
	Storage *StorageHealth `json:"storage,omitempty"`
}

// StorageHealth is the object store's side of Health.
type StorageHealth struct {
	// LagSeconds is how long ago the oldest turn not yet in the store
	// ended (0 when every session is written).
	LagSeconds float64 `json:"lag_seconds"`
	// Error is why the last write failed while one is failing.
	Error string `json:"error,omitempty"`
}

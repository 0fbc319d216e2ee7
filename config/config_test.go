package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// writeFile writes a config file in a fresh directory and returns its path.
func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), FileName)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// wantInvalid asserts err is EInvalid and its message holds every part.
func wantInvalid(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one naming %q", parts)
	}
	if !berth.IsCode(err, berth.EInvalid) {
		t.Fatalf("code = %q, want %q (err %v)", berth.ErrorCode(err), berth.EInvalid, err)
	}
	for _, p := range parts {
		if !strings.Contains(berth.ErrorMessage(err), p) {
			t.Errorf("message %q does not name %q", berth.ErrorMessage(err), p)
		}
	}
}

func TestDefault(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"server.addr", c.Server.Addr, "127.0.0.1:7380"},
		{"server.socket", c.Server.Socket, ""},
		{"store.sync", c.Store.Sync, "normal"},
		{"sandbox.default", c.Sandbox.Default, "auto"},
		{"sandbox.allow_host", c.Sandbox.AllowHost, true},
		{"sandbox.allow_network", c.Sandbox.AllowNetwork, true},
		{"sandbox.network", c.Sandbox.Network, false},
		{"sandbox.uid", c.Sandbox.UID, 1000},
		{"limits.max_prompt_bytes", c.Limits.MaxPromptBytes, 262144},
		{"limits.max_queue", c.Limits.MaxQueue, 10},
		{"limits.max_sessions", c.Limits.MaxSessions, 1000},
		{"limits.max_children", c.Limits.MaxChildren, 5},
		{"limits.max_depth", c.Limits.MaxDepth, 1},
		{"limits.permission_timeout", c.Limits.PermissionTimeout.Duration, 5 * time.Minute},
		{"limits.idle_timeout", c.Limits.IdleTimeout.Duration, 30 * time.Minute},
		{"limits.ttl", c.Limits.TTL.Duration, time.Duration(0)},
		{"limits.stall_after", c.Limits.StallAfter.Duration, 2 * time.Minute},
		{"limits.stall_timeout", c.Limits.StallTimeout.Duration, time.Duration(0)},
		{"limits.cancel_grace", c.Limits.CancelGrace.Duration, 10 * time.Second},
		{"limits.stop_grace", c.Limits.StopGrace.Duration, 5 * time.Second},
		{"limits.handshake_timeout", c.Limits.HandshakeTimeout.Duration, 30 * time.Second},
		{"limits.max_line_bytes", c.Limits.MaxLineBytes, 64 << 20},
		{"limits.session_inflight_bytes", c.Limits.SessionInflightBytes, 16 << 20},
		{"limits.max_turn_output", c.Limits.MaxTurnOutput, 64 << 20},
	}
	for _, ck := range checks {
		if ck.got != ck.want {
			t.Errorf("%s = %v, want %v", ck.name, ck.got, ck.want)
		}
	}
}

func TestLoadWithoutFile(t *testing.T) {
	c, err := Load("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c, Default()) {
		t.Errorf("Load(\"\") = %+v, want the defaults", c)
	}
	// A missing file at the default location is not an error.
	c, err = LoadDefault(t.TempDir(), []string{"BERTH_LIMITS_MAX_QUEUE=7"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Limits.MaxQueue != 7 {
		t.Errorf("max_queue = %d, want 7 from the environment", c.Limits.MaxQueue)
	}
}

func TestLoadExplicitMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.toml"), nil)
	wantInvalid(t, err, "cannot read the config file")
	if strings.Contains(berth.ErrorMessage(err), "nope.toml") {
		t.Errorf("message %q holds a host path", berth.ErrorMessage(err))
	}
}

func TestLoadDefaultReadsFile(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(DefaultPath(home), []byte("[limits]\nmax_queue = 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadDefault(home, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Limits.MaxQueue != 3 {
		t.Errorf("max_queue = %d, want 3", c.Limits.MaxQueue)
	}
}

func TestFileThenEnvPrecedence(t *testing.T) {
	p := writeFile(t, `
[server]
addr = "127.0.0.1:9000"
token = "from-file"
stop_sessions_on_exit = true

[store]
url = "sqlite:/tmp/x.db"

[sandbox]
default = "bwrap"

[limits]
max_queue = 20
max_sessions = 50
permission_timeout = "90s"
`)
	env := []string{
		"PATH=/usr/bin",
		"BERTH_LIMITS_MAX_QUEUE=30",
		"BERTH_SERVER_TOKEN=from-env",
		"BERTH_SANDBOX_DEFAULT=docker",
		"BERTH_STORE_SYNC=full",
		"BERTH_LIMITS_IDLE_TIMEOUT=0",
		"BERTH_SANDBOX_NETWORK=true",
		// Not configuration: ignored.
		"BERTH_HOME=/somewhere",
		"BERTH_ADDR=http://x",
		"BERTH_REQUIRE_INTEGRATION=1",
		"BERTH_SERVER",
		"BERTH_AGENTS_FOO=1",
	}
	c, err := Load(p, env)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"env beats file", c.Limits.MaxQueue, 30},
		{"file beats default", c.Limits.MaxSessions, 50},
		{"default kept", c.Limits.MaxChildren, 5},
		{"file duration", c.Limits.PermissionTimeout.Duration, 90 * time.Second},
		{"env duration 0", c.Limits.IdleTimeout.Duration, time.Duration(0)},
		{"file addr", c.Server.Addr, "127.0.0.1:9000"},
		{"env token", c.Server.Token, "from-env"},
		{"file bool", c.Server.StopSessionsOnExit, true},
		{"file url", c.Store.URL, "sqlite:/tmp/x.db"},
		{"env sync", c.Store.Sync, "full"},
		{"env default", c.Sandbox.Default, "docker"},
		{"env bool", c.Sandbox.Network, true},
		{"default true kept in a present section", c.Sandbox.AllowHost, true},
	}
	for _, ck := range checks {
		if ck.got != ck.want {
			t.Errorf("%s: got %v, want %v", ck.name, ck.got, ck.want)
		}
	}
}

func TestEnvLastWins(t *testing.T) {
	c, err := Load("", []string{"BERTH_LIMITS_MAX_QUEUE=1", "BERTH_LIMITS_MAX_QUEUE=2"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Limits.MaxQueue != 2 {
		t.Errorf("max_queue = %d, want 2", c.Limits.MaxQueue)
	}
}

func TestUnknownKeyInFile(t *testing.T) {
	cases := []struct{ body, key string }{
		{"[limits]\nmax_qeue = 3\n", `unknown key "limits.max_qeue"`},
		{"[sever]\naddr = \"x\"\n", `unknown key "sever"`},
		{"top = 1\n", `unknown key "top"`},
		{"[[agents]]\nname = \"a\"\ncommand = \"a\"\ncomand = \"b\"\n", `unknown key "agents.comand"`},
	}
	for _, tc := range cases {
		_, err := Load(writeFile(t, tc.body), nil)
		wantInvalid(t, err, tc.key)
	}
	_, err := Load(writeFile(t, "[limits]\nmax_qeue = 3\nmax_sesions = 3\n"), nil)
	wantInvalid(t, err, "limits.max_qeue", "limits.max_sesions")
}

func TestUnknownKeyInEnv(t *testing.T) {
	cases := []struct{ env, want string }{
		{"BERTH_LIMITS_MAX_QEUE=20", `unknown key "limits.max_qeue"`},
		{"BERTH_SERVER_ADRESS=x", `unknown key "server.adress"`},
		{"BERTH_STORE_PATH=x", `unknown key "store.path"`},
		{"BERTH_SANDBOX_=x", `unknown key "sandbox."`},
	}
	for _, tc := range cases {
		_, err := Load("", []string{tc.env})
		wantInvalid(t, err, tc.want, strings.SplitN(tc.env, "=", 2)[0])
	}
}

func TestBadValueTypes(t *testing.T) {
	_, err := Load(writeFile(t, "[limits]\nmax_queue = \"ten\"\n"), nil)
	wantInvalid(t, err, "limits.max_queue")
	_, err = Load(writeFile(t, "[limits]\nttl = \"5 minutes\"\n"), nil)
	wantInvalid(t, err, "limits.ttl", "invalid duration")
	_, err = Load(writeFile(t, "[limits\n"), nil)
	wantInvalid(t, err, "line 1")

	envCases := []struct{ env, key string }{
		{"BERTH_LIMITS_MAX_QUEUE=ten", "limits.max_queue"},
		{"BERTH_SANDBOX_ALLOW_HOST=maybe", "sandbox.allow_host"},
		{"BERTH_LIMITS_TTL=5x", "limits.ttl"},
		{"BERTH_LIMITS_TTL=-5", "limits.ttl"},
	}
	for _, tc := range envCases {
		_, err := Load("", []string{tc.env})
		wantInvalid(t, err, tc.key)
	}
}

func TestOutOfRange(t *testing.T) {
	fileCases := []struct{ body, key string }{
		{"[limits]\nmax_prompt_bytes = 0\n", "limits.max_prompt_bytes"},
		{"[limits]\nmax_prompt_bytes = 67108865\n", "limits.max_prompt_bytes"},
		{"[limits]\nmax_queue = -1\n", "limits.max_queue"},
		{"[limits]\nmax_sessions = 100001\n", "limits.max_sessions"},
		{"[limits]\nmax_line_bytes = 1023\n", "limits.max_line_bytes"},
		{"[limits]\nmax_turn_output = 1000\n", "limits.max_turn_output"},
		{"[limits]\npermission_timeout = \"0s\"\n", "limits.permission_timeout"},
		{"[limits]\nhandshake_timeout = \"2h\"\n", "limits.handshake_timeout"},
		{"[limits]\nidle_timeout = \"-1m\"\n", "limits.idle_timeout"},
		{"[sandbox]\ndefault = \"vm\"\n", "sandbox.default"},
		{"[sandbox]\nuid = -1\n", "sandbox.uid"},
		{"[sandbox]\ndefault = \"host\"\nallow_host = false\n", "sandbox.allow_host"},
		{"[sandbox]\ndefault = \"host\"\nrequire_isolation = true\n", "sandbox.require_isolation"},
		{"[sandbox]\nnetwork = true\nallow_network = false\n", "sandbox.allow_network"},
		{"[store]\nsync = \"paranoid\"\n", "store.sync"},
		{"[store]\nurl = \"mysql://u:p@h/db\"\n", "store.url"},
		{"[store]\nurl = \"memory:x\"\n", "store.url"},
		{"[server]\naddr = \"localhost\"\n", "server.addr"},
		{"[server]\naddr = \"localhost:99999\"\n", "server.addr"},
		{"[server]\nsocket = \"rel/berth.sock\"\n", "server.socket"},
		{"[server]\nsocket = \"/" + strings.Repeat("s", 120) + "\"\n", "server.socket"},
		{"[server]\nsession_ttl = \"30s\"\n", "server.session_ttl"},
		{"[server]\nsession_ttl = \"721h\"\n", "server.session_ttl"},
		{"[server]\nbody_timeout = \"0s\"\n", "server.body_timeout"},
		{"[server]\nmax_connections = 7\n", "server.max_connections"},
		{"[server]\nallowed_hosts = [\"evil.example/x\"]\n", "server.allowed_hosts"},
		{"[server]\nallowed_origins = [\"ui.example\"]\n", "server.allowed_origins"},
		{"[server]\nallowed_origins = [\"https://ui.example/path\"]\n", "server.allowed_origins"},
	}
	for _, tc := range fileCases {
		_, err := Load(writeFile(t, tc.body), nil)
		wantInvalid(t, err, tc.key)
	}
	_, err := Load("", []string{"BERTH_LIMITS_MAX_QUEUE=10001"})
	wantInvalid(t, err, "limits.max_queue", "10001", "1..10000")
	_, err = Load("", []string{"BERTH_LIMITS_STALL_AFTER=0"})
	wantInvalid(t, err, "limits.stall_after")
	_, err = Load("", []string{"BERTH_LIMITS_SESSION_INFLIGHT_BYTES=65535"})
	wantInvalid(t, err, "limits.session_inflight_bytes", "65535")
	c, err := Load("", []string{"BERTH_LIMITS_SESSION_INFLIGHT_BYTES=1048576"})
	if err != nil || c.Limits.SessionInflightBytes != 1<<20 {
		t.Fatalf("session_inflight_bytes from the environment: %v", err)
	}

	// A password in a refused store URL is not echoed.
	_, err = Load("", []string{"BERTH_STORE_URL=mysql://u:secret@h/db"})
	wantInvalid(t, err, "store.url")
	if strings.Contains(err.Error(), "secret") {
		t.Errorf("error %q echoes the store URL", err)
	}
}

// memory: names the in-memory store, in the file and the environment.
func TestMemoryStoreURL(t *testing.T) {
	c, err := Load(writeFile(t, "[store]\nurl = \"memory:\"\n"), nil)
	if err != nil || c.Store.URL != MemoryURL {
		t.Fatalf("memory: in the file: %+v %v", c.Store, err)
	}
	if c, err = Load("", []string{"BERTH_STORE_URL=memory:"}); err != nil || c.Store.URL != MemoryURL {
		t.Fatalf("memory: in the environment: %+v %v", c.Store, err)
	}
}

func TestValidateAfterChanges(t *testing.T) {
	c := Default()
	c.Limits.MaxDepth = 17
	wantInvalid(t, c.Validate(), "limits.max_depth")
}

func TestDurations(t *testing.T) {
	p := writeFile(t, `
[limits]
permission_timeout = "1h30m"
stall_after = 45
cancel_grace = "0s"
ttl = "24h"
`)
	c, err := Load(p, []string{"BERTH_LIMITS_STOP_GRACE=3", "BERTH_LIMITS_STALL_TIMEOUT=10m"})
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want time.Duration
	}{
		{"permission_timeout", c.Limits.PermissionTimeout.Duration, 90 * time.Minute},
		{"stall_after (integer seconds in the file)", c.Limits.StallAfter.Duration, 45 * time.Second},
		{"cancel_grace", c.Limits.CancelGrace.Duration, 0},
		{"ttl", c.Limits.TTL.Duration, 24 * time.Hour},
		{"stop_grace (integer seconds in env)", c.Limits.StopGrace.Duration, 3 * time.Second},
		{"stall_timeout", c.Limits.StallTimeout.Duration, 10 * time.Minute},
	}
	for _, ck := range checks {
		if ck.got != ck.want {
			t.Errorf("%s = %v, want %v", ck.name, ck.got, ck.want)
		}
	}

	texts := map[time.Duration]string{
		5 * time.Minute:         "5m",
		10 * time.Second:        "10s",
		time.Hour:               "1h",
		90 * time.Second:        "1m30s",
		time.Hour + time.Minute: "1h1m",
		0:                       "0s",
	}
	for d, want := range texts {
		b, err := Duration{d}.MarshalText()
		if err != nil || string(b) != want {
			t.Errorf("MarshalText(%v) = %q, %v; want %q", d, b, err, want)
		}
		var back Duration
		if err := back.UnmarshalText(b); err != nil || back.Duration != d {
			t.Errorf("UnmarshalText(%q) = %v, %v; want %v", b, back.Duration, err, d)
		}
	}
}

func TestDurationWrongTypeNamesKey(t *testing.T) {
	for _, v := range []string{"true", "-5", "1.5", `"-1s"`} {
		_, err := Load(writeFile(t, "[limits]\nttl = "+v+"\n"), nil)
		wantInvalid(t, err, "limits.ttl")
	}
}

func TestSandboxSettings(t *testing.T) {
	c, err := Load("", []string{"BERTH_SANDBOX_DOCKER_IMAGE=mine:1", "BERTH_SANDBOX_CPUS=0.5", "BERTH_SANDBOX_PIDS=64"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Sandbox.Docker.Image != "mine:1" || c.Sandbox.CPUs != 0.5 || c.Sandbox.Pids != 64 || c.Sandbox.MemoryMB != 2048 {
		t.Fatalf("sandbox = %+v", c.Sandbox)
	}
	if l := c.Sandbox.Limits(); l.NanoCPUs != 5e8 || l.Pids != 64 || l.MemoryBytes != 2048<<20 {
		t.Fatalf("limits = %+v", l)
	}
	c, err = Load(writeFile(t, "[sandbox.docker]\nhost = \"unix:///x.sock\"\n"), nil)
	if err != nil || c.Sandbox.Docker.Host != "unix:///x.sock" || c.Sandbox.Docker.Image != DefaultDockerImage {
		t.Fatalf("[sandbox.docker] = %+v, %v", c.Sandbox.Docker, err)
	}
	if c.Sandbox.HostUID != DefaultHostUID {
		t.Errorf("host_uid defaults to %d, want %d", c.Sandbox.HostUID, DefaultHostUID)
	}
	c, err = Load(writeFile(t, "[sandbox]\nhost_uid = 200000\n"), []string{"BERTH_SANDBOX_HOST_UID=123456"})
	if err != nil || c.Sandbox.HostUID != 123456 {
		t.Fatalf("BERTH_SANDBOX_HOST_UID: %+v, %v", c.Sandbox.HostUID, err)
	}
	c, err = Load(writeFile(t, "[sandbox]\nhost_uid = 200000\n"), nil)
	if err != nil || c.Sandbox.HostUID != 200000 {
		t.Fatalf("[sandbox] host_uid: %+v, %v", c.Sandbox.HostUID, err)
	}
	for _, v := range []string{"0", "999", "65535", "4294967295", "-1", "x"} {
		_, err := Load("", []string{"BERTH_SANDBOX_HOST_UID=" + v})
		wantInvalid(t, err, "sandbox.host_uid")
	}
	for _, env := range []string{"BERTH_SANDBOX_DOCKER_IMAGEX=1", "BERTH_SANDBOX_CPUS=-1", "BERTH_SANDBOX_DOCKER_IMAGE="} {
		if _, err := Load("", []string{env}); !berth.IsCode(err, berth.EInvalid) {
			t.Errorf("%s: %v, want invalid", env, err)
		}
	}
}

// The v2 [server] keys: defaults, file, and comma-separated lists from the
// environment.
func TestServerSecurityKeys(t *testing.T) {
	c := Default()
	if c.Server.SessionTTL.Duration != 12*time.Hour || c.Server.BodyTimeout.Duration != 30*time.Second ||
		c.Server.MaxConnections != 512 || c.Server.LoopbackWithoutToken {
		t.Errorf("defaults = %+v", c.Server)
	}
	body := "[server]\nloopback_without_token = true\nallowed_hosts = [\"berth.lan\"]\n" +
		"allowed_origins = [\"https://ui.example:8443\"]\nsession_ttl = \"1h\"\nbody_timeout = \"5s\"\nmax_connections = 64\n"
	c, err := Load(writeFile(t, body), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Server.LoopbackWithoutToken || len(c.Server.AllowedHosts) != 1 || c.Server.AllowedOrigins[0] != "https://ui.example:8443" ||
		c.Server.SessionTTL.Duration != time.Hour || c.Server.BodyTimeout.Duration != 5*time.Second || c.Server.MaxConnections != 64 {
		t.Errorf("from the file = %+v", c.Server)
	}
	c, err = Load("", []string{"BERTH_SERVER_ALLOWED_HOSTS=a.lan, b.lan,", "BERTH_SERVER_ALLOWED_ORIGINS=http://a.lan:7380",
		"BERTH_SERVER_LOOPBACK_WITHOUT_TOKEN=true", "BERTH_SERVER_MAX_CONNECTIONS=100"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.Server.AllowedHosts, "|") != "a.lan|b.lan" || c.Server.AllowedOrigins[0] != "http://a.lan:7380" ||
		!c.Server.LoopbackWithoutToken || c.Server.MaxConnections != 100 {
		t.Errorf("from the environment = %+v", c.Server)
	}
}

// [sandbox] tmp_mb (default 256) and max_memory_mb (default 0, no cap)
// reach the limits; memory_mb below 32, over max_memory_mb, or a negative
// cap are refused naming the key.
func TestSandboxMemoryAndTmp(t *testing.T) {
	c, err := Load("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Sandbox.TmpMB != 256 || c.Sandbox.MaxMemoryMB != 0 || c.Sandbox.Limits().TmpBytes != 256<<20 {
		t.Fatalf("defaults: %+v", c.Sandbox)
	}
	c, err = Load("", []string{"BERTH_SANDBOX_TMP_MB=0", "BERTH_SANDBOX_MAX_MEMORY_MB=4096", "BERTH_SANDBOX_MEMORY_MB=512"})
	if err != nil || c.Sandbox.TmpMB != 0 || c.Sandbox.MaxMemoryMB != 4096 || c.Sandbox.Limits().MemoryBytes != 512<<20 {
		t.Fatalf("from the environment: %+v, %v", c.Sandbox, err)
	}
	for key, env := range map[string]string{
		"sandbox.memory_mb":     "BERTH_SANDBOX_MEMORY_MB=16",
		"sandbox.max_memory_mb": "BERTH_SANDBOX_MAX_MEMORY_MB=-1",
		"sandbox.tmp_mb":        "BERTH_SANDBOX_TMP_MB=-5",
	} {
		_, err := Load("", []string{env})
		wantInvalid(t, err, key)
	}
	_, err = Load("", []string{"BERTH_SANDBOX_MAX_MEMORY_MB=1024"})
	wantInvalid(t, err, "sandbox.memory_mb")
}

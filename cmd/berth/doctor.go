package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/config"
	"github.com/berth-sh/berth/daemon"
	"github.com/berth-sh/berth/gateway"
	"github.com/berth-sh/berth/sandbox/bwrap"
	"github.com/berth-sh/berth/sandbox/providers"
)

// doctorTimeout bounds each check that waits on something (an engine, a
// database, a trial sandbox).
const doctorTimeout = 10 * time.Second

// Check outcomes: fail makes `berth doctor` exit 1; warn is something a
// feature the config does not depend on lacks; skip is not applicable.
const (
	checkOK   = "ok"
	checkWarn = "warn"
	checkFail = "fail"
	checkSkip = "skip"
)

// check is one line of the doctor's report.
type check struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail"`
}

// doctorReport is what `berth doctor -o json` prints.
type doctorReport struct {
	OK     bool    `json:"ok"`
	Checks []check `json:"checks"`
}

// newDoctorCommand returns `berth doctor`: what this machine and home can
// and cannot do for berth, checked locally (no daemon needed).
func newDoctorCommand() *cobra.Command {
	var cfgPath string
	cmd := &cobra.Command{
		Use:   "doctor [--config FILE]",
		Short: "Check bubblewrap, Docker, the store and each agent; exit 1 when a configured feature is broken",
		Long: "Check what berth needs on this machine, without a daemon: the config, the home, the\n" +
			"store, a daemon if one runs, bubblewrap and user namespaces (a trial sandbox, without\n" +
			"and with network, run as you: run doctor as the daemon's user), the Docker engine,\n" +
			"and each catalog agent's command and credentials. A check fails (exit 1) only when\n" +
			"something the config relies on is broken; what an unused feature lacks is a warning.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			asJSON, err := jsonOutput(cmd)
			if err != nil {
				return err
			}
			home, err := homeDir(cmd)
			if err != nil {
				return err
			}
			r := runDoctor(cmd, home, cfgPath)
			out := cmd.OutOrStdout()
			if asJSON {
				b, _ := json.Marshal(r)
				fmt.Fprintln(out, string(b))
			} else {
				t := newTable(out)
				fmt.Fprintln(t, "STATUS\tCHECK\tDETAIL")
				for _, c := range r.Checks {
					fmt.Fprintf(t, "%s\t%s\t%s\n", c.Status, c.Name, c.Detail)
				}
				_ = t.Flush()
			}
			if !r.OK {
				var failed []string
				for _, c := range r.Checks {
					if c.Status == checkFail {
						failed = append(failed, c.Name)
					}
				}
				return berth.Errorf(berth.EUnavailable, "%d check(s) failed: %s", len(failed), strings.Join(failed, ", "))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "config file (default $BERTH_HOME/config.toml)")
	return cmd
}

// runDoctor runs every check in order; a config that does not load leaves
// only the checks that do not need it.
func runDoctor(cmd *cobra.Command, home, cfgPath string) doctorReport {
	ctx := cmd.Context()
	var r doctorReport
	add := func(c check) { r.Checks = append(r.Checks, c) }
	cfg, err := loadConfig(home, cfgPath)
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		add(check{"config", checkFail, berth.ErrorMessage(err)})
	} else {
		path := orDefault(cfgPath, config.DefaultPath(home))
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			add(check{"config", checkOK, "no " + path + ": the defaults"})
		} else {
			add(check{"config", checkOK, "loaded (" + path + ")"})
		}
	}
	add(checkHome(home))
	if cfg != nil && err == nil {
		add(checkDaemon(cmd))
		add(checkStore(ctx, home, cfg.Store))
		add(checkStorage(cmd, cfg.Storage))
		r.Checks = append(r.Checks, checkSandboxes(ctx, cfg, home)...)
		r.Checks = append(r.Checks, checkAgents(cfg, daemonCredentials(cmd))...)
	}
	r.OK = !slices.ContainsFunc(r.Checks, func(c check) bool { return c.Status == checkFail })
	return r
}

// orDefault is s, or def when s is empty.
func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// checkHome: the home is a directory only its owner reads (it holds the
// token, the store and the socket).
func checkHome(home string) check {
	fi, err := os.Stat(home)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return check{"home", checkOK, home + " does not exist yet (the daemon creates it, 0700)"}
	case err != nil:
		return check{"home", checkFail, err.Error()}
	case !fi.IsDir():
		return check{"home", checkFail, home + " is not a directory"}
	case fi.Mode().Perm()&0o077 != 0:
		return check{"home", checkWarn, fmt.Sprintf("%s is %04o: others may read it (the daemon makes it 0700 at start)", home, fi.Mode().Perm())}
	}
	return check{"home", checkOK, home}
}

// checkDaemon: whether a daemon answers on this home's address (not
// running is not a failure: the doctor is for before the start too).
func checkDaemon(cmd *cobra.Command) check {
	c, err := dial(cmd)
	if err != nil {
		return check{"daemon", checkWarn, berth.ErrorMessage(err)}
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(cmd.Context(), 3*time.Second)
	defer cancel()
	var h struct {
		Version string `json:"version"`
	}
	if err := c.Do(ctx, "GET", "/v1/health", nil, nil, &h); err != nil {
		if isUnavailable(err) {
			return check{"daemon", checkSkip, "not running"}
		}
		return check{"daemon", checkFail, "it answers, but: " + berth.ErrorMessage(err)}
	}
	return check{"daemon", checkOK, "serving, version " + orDefault(h.Version, "unknown")}
}

// checkStore opens the configured store read-only and asks it to check
// itself: SQLite's quick_check, or a PostgreSQL round trip. A memory
// store is a warning: it keeps nothing.
func checkStore(ctx context.Context, home string, sc config.Store) check {
	ctx, cancel := context.WithTimeout(ctx, doctorTimeout)
	defer cancel()
	if sc.URL == config.MemoryURL {
		// Nothing to check, but a warning worth reading before trusting it
		// with work.
		return check{"store", checkWarn, "memory: nothing is kept; every session and its log are lost when the daemon exits"}
	}
	if strings.HasPrefix(sc.URL, "postgres://") || strings.HasPrefix(sc.URL, "postgresql://") {
		conn, err := pgx.Connect(ctx, sc.URL)
		if err != nil {
			return check{"store", checkFail, "postgres: " + err.Error()}
		}
		defer conn.Close(context.WithoutCancel(ctx))
		var v string
		if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&v); err != nil {
			return check{"store", checkFail, "postgres: " + err.Error()}
		}
		return check{"store", checkOK, "postgres " + v + " answers"}
	}
	path, err := daemon.CheckSQLiteStore(home, sc.URL)
	if err != nil {
		return check{"store", checkFail, berth.ErrorMessage(err)}
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return check{"store", checkOK, "sqlite " + path + " does not exist yet (the daemon creates it)"}
	}
	dsn := (&url.URL{Scheme: "file", Path: path, RawQuery: "mode=ro&_pragma=busy_timeout(5000)"}).String()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return check{"store", checkFail, "sqlite " + path + ": " + err.Error()}
	}
	defer db.Close()
	var res string
	if err := db.QueryRowContext(ctx, "PRAGMA quick_check").Scan(&res); err != nil {
		return check{"store", checkFail, "sqlite " + path + ": " + err.Error()}
	}
	if res != "ok" {
		return check{"store", checkFail, "sqlite " + path + " is damaged: " + res}
	}
	return check{"store", checkOK, "sqlite " + path + " passes quick_check"}
}

// checkSandboxes tries bwrap for real, as the daemon would run it (a
// trial sandbox without and with network), and probes the Docker engine.
// Each is a failure only when the config relies on it: bwrap as the
// default (or "auto" with require_isolation), its network when such
// sessions may have network, docker as the default.
func checkSandboxes(ctx context.Context, cfg *config.Config, home string) []check {
	po := daemon.ProviderOptions(cfg, "", home)
	rel := providers.RelianceOf(cfg.Sandbox.Default, cfg.Sandbox.RequireIsolation)
	out := checkBwrap(ctx, po.Bwrap(), bwrapNeeds{
		bwrap:    rel.BwrapNeeded,
		used:     rel.BwrapUsed,
		fallback: rel.HostFallback,
		network:  cfg.Sandbox.AllowNetwork,
		memory:   cfg.Sandbox.MemoryMB > 0,
	})
	dk, err := providers.Docker(po)
	if err != nil {
		return append(out, check{"sandbox docker", severity(rel.DockerNeeded), berth.ErrorMessage(err)})
	}
	defer dk.Close()
	pctx, cancel := context.WithTimeout(ctx, doctorTimeout)
	defer cancel()
	if err := dk.Probe(pctx); err != nil {
		return append(out, check{"sandbox docker", severity(rel.DockerNeeded), berth.ErrorMessage(err)})
	}
	return append(out, check{"sandbox docker", checkOK, "the engine answers"})
}

// severity is how a broken feature counts: a failure when the config
// needs it, else a warning.
func severity(needed bool) string {
	if needed {
		return checkFail
	}
	return checkWarn
}

// bwrapNeeds is what the config asks of bwrap.
type bwrapNeeds struct {
	// bwrap: sessions need it (its failure fails the doctor); used: it is
	// what sessions get when it works; fallback: sessions fall back to
	// the host sandbox without it.
	bwrap, used, fallback bool
	// network: sessions may have network; memory: they get memory_mb.
	network, memory bool
}

// checkBwrap is bwrap's part of the report: its namespaces (Probe), the
// user namespaces the kernel allows, a trial sandbox without network and
// one with (slirp4netns), as the daemon's user runs them, in the failing
// tool's words; and the memory cgroup.
func checkBwrap(ctx context.Context, p *bwrap.Provider, need bwrapNeeds) []check {
	var out []check
	pctx, cancel := context.WithTimeout(ctx, doctorTimeout)
	err := p.Probe(pctx)
	if err == nil {
		err = p.Trial(pctx, false)
	}
	cancel()
	if err != nil {
		detail := berth.ErrorMessage(err)
		if need.fallback {
			detail += " (sessions fall back to the host sandbox, without isolation)"
		}
		out = append(out, check{"sandbox bwrap", severity(need.bwrap), detail})
	} else {
		out = append(out, check{"sandbox bwrap", checkOK, "a trial sandbox ran (" + sandboxUser() + ")"})
	}
	out = append(out, checkUserNamespaces(severity(need.bwrap)))
	usesBwrap := err == nil && need.used
	switch {
	case err != nil:
		out = append(out, check{"sandbox bwrap network", checkWarn, "not tried: bwrap itself does not work here"})
	default:
		pctx, cancel := context.WithTimeout(ctx, doctorTimeout)
		nerr := p.Trial(pctx, true)
		cancel()
		if nerr != nil {
			out = append(out, check{"sandbox bwrap network", severity(usesBwrap && need.network),
				berth.ErrorMessage(nerr) + ": bwrap sessions with network do not start"})
		} else {
			out = append(out, check{"sandbox bwrap network", checkOK, "a trial sandbox with network ran (slirp4netns)"})
		}
	}
	if err == nil {
		out = append(out, checkBwrapMemory(p, usesBwrap && need.memory))
	}
	return out
}

// sandboxUser says whom the trial sandboxes ran as on the host.
func sandboxUser() string {
	if os.Geteuid() == 0 {
		return "as root, whose sandboxes run as [sandbox] host_uid"
	}
	name := strconv.Itoa(os.Getuid())
	if u, err := user.LookupId(name); err == nil {
		name = u.Username
	}
	return "as " + name
}

// checkUserNamespaces reads the kernel's switches for the user namespaces
// bwrap needs (as a non-root user, and as the host uid of a root daemon).
func checkUserNamespaces(severity string) check {
	const name = "user namespaces"
	b, err := os.ReadFile("/proc/sys/user/max_user_namespaces")
	if err != nil {
		return check{name, severity, "cannot read /proc/sys/user/max_user_namespaces: " + err.Error()}
	}
	if strings.TrimSpace(string(b)) == "0" {
		return check{name, severity, "disabled: user.max_user_namespaces = 0 (sysctl -w user.max_user_namespaces=15000)"}
	}
	// Debian's and Ubuntu's older kernels have a switch of their own.
	if b, err := os.ReadFile("/proc/sys/kernel/unprivileged_userns_clone"); err == nil && strings.TrimSpace(string(b)) == "0" {
		return check{name, severity, "disabled for unprivileged users: kernel.unprivileged_userns_clone = 0"}
	}
	// Ubuntu 24.04's AppArmor restricts them unless a profile allows bwrap.
	if b, err := os.ReadFile("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"); err == nil && strings.TrimSpace(string(b)) == "1" {
		return check{name, checkWarn, "restricted by AppArmor (kernel.apparmor_restrict_unprivileged_userns = 1): bwrap needs a profile that allows them"}
	}
	return check{name, checkOK, "enabled: user.max_user_namespaces = " + strings.TrimSpace(string(b))}
}

// checkAgents looks at each catalog agent: is its command there, and are
// credentials for it (one of its pass_env variables, or one of its
// home_files in the user's home)? An agent the config names whose command
// is missing fails; a built-in one that is not installed is skipped.
func checkAgents(cfg *config.Config, stored map[string]bool) []check {
	self, _ := os.Executable()
	cat, err := cfg.Catalog(self)
	if err != nil {
		return []check{{"agents", checkFail, berth.ErrorMessage(err)}}
	}
	upstreams, err := cfg.Upstreams()
	if err != nil {
		return []check{{"agents", checkFail, berth.ErrorMessage(err)}}
	}
	configured := map[string]bool{}
	for _, a := range cfg.Agents {
		configured[a.Name] = true
	}
	userHome := daemon.UserHome()
	var out []check
	for _, info := range cat.List() {
		spec, _ := cat.Get(info.Name)
		name := "agent " + info.Name
		command := strings.Join(append([]string{spec.Command}, spec.Args...), " ")
		if !info.Available {
			status := checkSkip
			if configured[info.Name] {
				status = checkFail
			}
			out = append(out, check{name, status, spec.Command + " not found: would run " + command})
			continue
		}
		if spec.ModelAPI != "" && spec.ModelAPI != berth.ModelAPINone {
			out = append(out, checkGatewayCredential(name, command, spec.ModelAPI, upstreams, stored))
			continue
		}
		if len(spec.PassEnv) == 0 && len(spec.HomeFiles) == 0 {
			out = append(out, check{name, checkOK, "runs " + command})
			continue
		}
		if found := credentials(spec, userHome); found != "" {
			out = append(out, check{name, checkOK, "runs " + command + "; credentials: " + found})
			continue
		}
		want := spec.PassEnv
		if len(spec.HomeFiles) > 0 {
			want = append(slices.Clone(want), "~/"+spec.HomeFiles[0])
		}
		out = append(out, check{name, checkWarn, "runs " + command + "; no credentials found (set one of " + strings.Join(want, ", ") + ", or log in with the agent)"})
	}
	return out
}

// checkGatewayCredential: an agent the model gateway points at its
// kind's upstream needs that upstream's credential stored (stored: the
// daemon's credential names, nil when it could not be asked).
func checkGatewayCredential(name, command, kind string, upstreams []gateway.Upstream, stored map[string]bool) check {
	i := slices.IndexFunc(upstreams, func(u gateway.Upstream) bool { return u.Name == kind })
	if i < 0 || upstreams[i].Credential == "" {
		return check{name, checkOK, "runs " + command + "; its model calls go through the gateway's " + kind + " upstream, which needs no credential"}
	}
	cred := upstreams[i].Credential
	switch {
	case stored == nil:
		return check{name, checkWarn, fmt.Sprintf("runs %s; it needs the credential %q (the daemon is not running: cannot tell whether it is set; berth credentials set %s)", command, cred, cred)}
	case !stored[cred]:
		return check{name, checkWarn, fmt.Sprintf("runs %s; the credential %q is not set: berth credentials set %s", command, cred, cred)}
	}
	return check{name, checkOK, fmt.Sprintf("runs %s; its model calls go through the gateway with the credential %q", command, cred)}
}

// daemonCredentials are the names of the credentials the daemon keeps;
// nil when it cannot be asked.
func daemonCredentials(cmd *cobra.Command) map[string]bool {
	c, err := dial(cmd)
	if err != nil {
		return nil
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(cmd.Context(), 3*time.Second)
	defer cancel()
	list, err := c.ListCredentials(ctx)
	if err != nil {
		return nil
	}
	names := map[string]bool{}
	for _, cr := range list {
		names[cr.Name] = true
	}
	return names
}

// credentials names what an agent would be given to sign in with: its
// pass_env variables that are set, and its home_files that exist.
func credentials(spec berth.AgentSpec, userHome string) string {
	var found []string
	for _, k := range spec.PassEnv {
		if os.Getenv(k) != "" {
			found = append(found, "$"+k)
		}
	}
	if userHome != "" {
		for _, f := range spec.HomeFiles {
			if _, err := os.Stat(filepath.Join(userHome, f)); err == nil {
				found = append(found, "~/"+f)
			}
		}
	}
	return strings.Join(found, ", ")
}

// checkBwrapMemory says whether bwrap enforces memory_mb here (a memory
// cgroup the daemon may make); a warning when sessions would get the
// [sandbox] memory_mb default (needed) but will not.
func checkBwrapMemory(p *bwrap.Provider, needed bool) check {
	if err := p.LimitsMemory(); err != nil {
		status := checkOK
		if needed {
			status = checkWarn
		}
		return check{"sandbox bwrap memory", status, berth.ErrorMessage(err) +
			" ([sandbox] memory_mb is not enforced; a session asking memory_mb is refused)"}
	}
	return check{"sandbox bwrap memory", checkOK, "a memory cgroup per sandbox enforces memory_mb"}
}

package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/api/types/jsonstream"
	"github.com/moby/moby/client"

	"github.com/berth-sh/berth"
)

// imageDockerfile builds the default image from the context that
// buildContext makes: busybox and its applet links, /etc/passwd and
// /etc/group, the mount points the provider uses. Its label LabelUser is
// the "uid:gid" its passwd names.
const imageDockerfile = `FROM scratch
COPY rootfs/ /
ENV ` + imagePath + `
LABEL berth.image="default" ` + LabelUser + `="%s"
CMD ["/bin/sh"]
`

// imagePath is the default image's environment.
const imagePath = "PATH=/usr/local/bin:/bin"

// LabelUser is the default image's label that holds the "uid:gid" of the
// user its /etc/passwd names, the one its containers run as.
const LabelUser = "berth.user"

// ensureImage makes sure image is on the engine and returns what
// containers are made from. The default image is built when it is missing
// or is the provider's own build (ownBuild) for another user than who
// (LabelUser: providers of other users share the engine), and containers
// are made from its id, even when another provider tags another build
// with its name since. Any other image, and a default image of the user's
// own, is used by its name (a rebuild of it is used at once); missing, it
// is EUnavailable: berth never pulls.
func (p *Provider) ensureImage(ctx context.Context, image string, who identity) (string, error) {
	if id, ok := p.knownImage(image); ok {
		return id, nil
	}
	p.buildMu.Lock()
	defer p.buildMu.Unlock()
	if id, ok := p.knownImage(image); ok {
		return id, nil
	}
	res, err := p.cli.ImageInspect(ctx, image)
	id := res.ID
	switch {
	case err == nil && (image != p.opts.Image || !ownBuild(res)):
		id = image
	case err == nil && imageUser(res) == who.user():
	case err != nil && !cerrdefs.IsNotFound(err):
		return "", berth.WrapError(berth.EUnavailable, err, "docker: cannot inspect image %q: %s", image, reason(ctx, err))
	case image != p.opts.Image:
		return "", berth.Errorf(berth.EUnavailable, "docker: image %q is not on the engine (berth does not pull images: pull or build it first)", image)
	default:
		if id, err = p.buildDefaultImage(ctx, image, who); err != nil {
			return "", err
		}
	}
	p.mu.Lock()
	p.images[image] = id
	p.mu.Unlock()
	return id, nil
}

// ownBuild reports whether an image is what buildDefaultImage makes, by
// its labels, command, environment and single layer, and so may be built
// again for another user. An image derived from it (an agent image FROM
// berth-sandbox:local) inherits its labels but not the rest: it is the
// user's, never replaced.
func ownBuild(res client.ImageInspectResult) bool {
	c := res.Config
	if c == nil || c.Labels["berth.image"] != "default" || len(res.RootFS.Layers) != 1 {
		return false
	}
	for k := range c.Labels {
		if k != "berth.image" && k != LabelUser {
			return false
		}
	}
	return slices.Equal(c.Cmd, []string{"/bin/sh"}) && len(c.Entrypoint) == 0 &&
		slices.Equal(c.Env, []string{imagePath}) && c.User == "" && c.WorkingDir == ""
}

// imageUser is an image's LabelUser, "" when it has none.
func imageUser(res client.ImageInspectResult) string {
	if res.Config == nil {
		return ""
	}
	return res.Config.Labels[LabelUser]
}

// knownImage returns the id of image when it was seen on the engine.
func (p *Provider) knownImage(image string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	id, ok := p.images[image]
	return id, ok
}

// forgetImage drops image from the known ones (it was removed behind our
// back).
func (p *Provider) forgetImage(image string) {
	p.mu.Lock()
	delete(p.images, image)
	p.mu.Unlock()
}

// buildDefaultImage builds image for who with the classic builder from an
// in-memory context: no registry, no base image, no RUN step. It returns
// the built image's id.
func (p *Provider) buildDefaultImage(ctx context.Context, image string, who identity) (string, error) {
	helper := p.helper()
	if helper == "" {
		return "", berth.Errorf(berth.EUnavailable, "docker: image %q is missing and cannot be built: no static busybox on this host (install busybox-static)", image)
	}
	tarball, err := buildContext(helper, who.uid, who.gid)
	if err != nil {
		return "", berth.WrapError(berth.EInternal, err, "docker: cannot prepare the build of %q", image)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for attempt := 1; ; attempt++ {
		id, err := p.buildOnce(ctx, image, tarball)
		// The same build again is harmless: an engine under load has failed
		// one in its own layers ("…-init/merged/dev/shm: no such file").
		if err == nil || attempt >= buildAttempts || ctx.Err() != nil {
			return id, err
		}
		slog.Warn("docker: the engine failed a build of the default image; building it again", "image", image, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(attempt) * 250 * time.Millisecond):
		}
	}
}

// buildAttempts bounds how many times the default image's build is tried.
const buildAttempts = 3

// buildOnce asks the engine for one build of the default image from
// tarball, its context.
func (p *Provider) buildOnce(ctx context.Context, image string, tarball []byte) (string, error) {
	res, err := p.cli.ImageBuild(ctx, bytes.NewReader(tarball), client.ImageBuildOptions{
		Tags:           []string{image},
		Remove:         true,
		ForceRemove:    true,
		SuppressOutput: true,
		NetworkMode:    "none",
		Version:        build.BuilderV1,
	})
	if err != nil {
		return "", berth.WrapError(berth.EUnavailable, err, "docker: cannot build image %q: %s", image, reason(ctx, err))
	}
	defer res.Body.Close()
	id, err := buildResult(res.Body)
	if err != nil {
		return "", berth.WrapError(berth.EUnavailable, err, "docker: cannot build image %q: %v", image, err)
	}
	return id, nil
}

// buildResult reads a build's JSON message stream to its end and returns
// the built image's id (its aux message, or the only line of a build with
// SuppressOutput), or the first error the stream reports.
func buildResult(r io.Reader) (string, error) {
	dec := json.NewDecoder(r)
	id := ""
	for {
		var m struct {
			jsonstream.Message
			ErrorText string `json:"error"`
		}
		if err := dec.Decode(&m); err != nil {
			if !errors.Is(err, io.EOF) {
				return "", err
			}
			if id == "" {
				return "", errors.New("the engine did not say which image it built")
			}
			return id, nil
		}
		if m.Error != nil && m.Error.Message != "" {
			return "", errors.New(strings.TrimSpace(m.Error.Message))
		}
		if m.ErrorText != "" {
			return "", errors.New(strings.TrimSpace(m.ErrorText))
		}
		var aux struct{ ID string }
		if m.Aux != nil && json.Unmarshal(*m.Aux, &aux) == nil && aux.ID != "" {
			id = aux.ID
		} else if line := strings.TrimSpace(m.Stream); strings.HasPrefix(line, "sha256:") && !strings.ContainsAny(line, " \n") {
			id = line
		}
	}
}

// buildContext makes the default image's build context as a tar archive:
// the Dockerfile, and rootfs/ with /bin/busybox (a copy of helper), a
// symlink to it for each applet, /etc/passwd and /etc/group naming root and
// the sandbox user (uid:gid, also in the Dockerfile's LabelUser), and the
// directories the provider mounts on.
func buildContext(helper string, uid, gid int) ([]byte, error) {
	bin, err := os.ReadFile(helper)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Unix(0, 0)
	file := func(name string, mode int64, body []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(body)), ModTime: now, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := tw.Write(body)
		return err
	}
	dir := func(name string, mode int64) error {
		return tw.WriteHeader(&tar.Header{Name: name + "/", Mode: mode, ModTime: now, Typeflag: tar.TypeDir})
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/bin/sh\nberth:x:%d:%d:berth:/tmp:/bin/sh\n", uid, gid)
	group := fmt.Sprintf("root:x:0:\nberth:x:%d:\n", gid)
	steps := []func() error{
		func() error {
			return file("Dockerfile", 0o644, fmt.Appendf(nil, imageDockerfile, fmt.Sprintf("%d:%d", uid, gid)))
		},
		func() error { return dir("rootfs", 0o755) },
		func() error { return dir("rootfs/bin", 0o755) },
		func() error { return dir("rootfs/etc", 0o755) },
		func() error { return dir("rootfs/root", 0o700) },
		func() error { return dir("rootfs/tmp", 0o1777) },
		func() error { return dir("rootfs/usr", 0o755) },
		func() error { return dir("rootfs/usr/local", 0o755) },
		func() error { return dir("rootfs/usr/local/bin", 0o755) },
		func() error { return file("rootfs/bin/busybox", 0o755, bin) },
		func() error { return file("rootfs/etc/passwd", 0o644, []byte(passwd)) },
		func() error { return file("rootfs/etc/group", 0o644, []byte(group)) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
	}
	for _, name := range applets(helper) {
		if err := tw.WriteHeader(&tar.Header{Name: "rootfs/bin/" + name, Linkname: "busybox", Mode: 0o777,
			ModTime: now, Typeflag: tar.TypeSymlink}); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
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
// /etc/group, the mount points the provider uses.
const imageDockerfile = `FROM scratch
COPY rootfs/ /
ENV PATH=/usr/local/bin:/bin
LABEL berth.image="default"
CMD ["/bin/sh"]
`

// ensureImage makes sure image is on the engine. The default image is
// built when missing; any other missing image is EUnavailable: berth never
// pulls.
func (p *Provider) ensureImage(ctx context.Context, image string) error {
	if p.knownImage(image) {
		return nil
	}
	p.buildMu.Lock()
	defer p.buildMu.Unlock()
	if p.knownImage(image) {
		return nil
	}
	_, err := p.cli.ImageInspect(ctx, image)
	switch {
	case err == nil:
	case !cerrdefs.IsNotFound(err):
		return berth.WrapError(berth.EUnavailable, err, "docker: cannot inspect image %q: %s", image, reason(ctx, err))
	case image != p.opts.Image:
		return berth.Errorf(berth.EUnavailable, "docker: image %q is not on the engine (berth does not pull images: pull or build it first)", image)
	default:
		if err := p.buildDefaultImage(ctx, image); err != nil {
			return err
		}
	}
	p.mu.Lock()
	p.images[image] = true
	p.mu.Unlock()
	return nil
}

// knownImage reports whether image was seen on the engine.
func (p *Provider) knownImage(image string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.images[image]
}

// forgetImage drops image from the known ones (it was removed behind our
// back).
func (p *Provider) forgetImage(image string) {
	p.mu.Lock()
	delete(p.images, image)
	p.mu.Unlock()
}

// buildDefaultImage builds image with the classic builder from an
// in-memory context: no registry, no base image, no RUN step.
func (p *Provider) buildDefaultImage(ctx context.Context, image string) error {
	if p.helper == "" {
		return berth.Errorf(berth.EUnavailable, "docker: image %q is missing and cannot be built: no static busybox on this host (install busybox-static)", image)
	}
	tarball, err := buildContext(p.helper, p.opts.UID, p.opts.GID)
	if err != nil {
		return berth.WrapError(berth.EInternal, err, "docker: cannot prepare the build of %q", image)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	res, err := p.cli.ImageBuild(ctx, bytes.NewReader(tarball), client.ImageBuildOptions{
		Tags:           []string{image},
		Remove:         true,
		ForceRemove:    true,
		SuppressOutput: true,
		NetworkMode:    "none",
		Version:        build.BuilderV1,
	})
	if err != nil {
		return berth.WrapError(berth.EUnavailable, err, "docker: cannot build image %q: %s", image, reason(ctx, err))
	}
	defer res.Body.Close()
	if err := buildError(res.Body); err != nil {
		return berth.WrapError(berth.EUnavailable, err, "docker: cannot build image %q: %v", image, err)
	}
	return nil
}

// buildError reads a build's JSON message stream to its end and returns
// the first error it reports.
func buildError(r io.Reader) error {
	dec := json.NewDecoder(r)
	for {
		var m struct {
			jsonstream.Message
			ErrorText string `json:"error"`
		}
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if m.Error != nil && m.Error.Message != "" {
			return errors.New(strings.TrimSpace(m.Error.Message))
		}
		if m.ErrorText != "" {
			return errors.New(strings.TrimSpace(m.ErrorText))
		}
	}
}

// buildContext makes the default image's build context as a tar archive:
// the Dockerfile, and rootfs/ with /bin/busybox (a copy of helper), a
// symlink to it for each applet, /etc/passwd and /etc/group naming root and
// the sandbox user, and the directories the provider mounts on.
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
		func() error { return file("Dockerfile", 0o644, []byte(imageDockerfile)) },
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

// pulumi-language-python: the project's own Pulumi language host for Python programs (issue 8).
//
// Pulumi's host (github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3) is not served by
// the Go module proxy at any version, so this one is written here over the gRPC types of sdk/v3 (the
// same version as the CLI). It does what `pulumi preview/up/destroy` need and nothing more:
//
//   - Run: runs `python -u pulumi-language-python-exec --monitor ... <entry point>` in the
//     program's virtualenv, with the stack's config in PULUMI_CONFIG / PULUMI_CONFIG_SECRET_KEYS;
//   - GetRequiredPackages: the Pulumi packages installed in that virtualenv (their pulumi-plugin.json),
//     so the engine knows which resource plugins the program will use;
//   - GetPluginInfo, Handshake, Cancel, About, RuntimeOptionsPrompts (none), and InstallDependencies,
//     which only checks the virtualenv: the project creates it itself (./dev.sh), pinned.
//
// Only the pip toolchain is supported (runtime.options.toolchain: pip, or unset), with or without
// runtime.options.virtualenv; uv, poetry and the typechecker option are refused with an error. Every
// other RPC (code generation, packing, plugins written in Python, debugging) answers Unimplemented,
// which the CLI treats as "not supported by this host".
//
// Like every language host it is started by the CLI with the engine's address as its argument, and
// prints the port it serves on as the only line of its standard output.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/util/rpcutil"
	"github.com/pulumi/pulumi/sdk/v3/go/common/version"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// execScript is the Python shim that connects a program to the engine; it ships in the sdk/v3 module
// (python/cmd/pulumi-language-python-exec) and tools/build.sh installs it beside this binary.
const execScript = "pulumi-language-python-exec"

// exitShownToUser is the exit code with which the shim says it already showed the user the error.
const exitShownToUser = 32

func main() {
	showVersion := flag.Bool("version", false, "print the version and exit")
	executor := flag.String("use-executor", "", "the exec shim to run (default: "+execScript+" beside this binary)")
	flag.String("tracing", "", "accepted for compatibility with the CLI; tracing is not forwarded")
	flag.Parse()
	if *showVersion {
		fmt.Println(version.Version)
		return
	}

	exe := *executor
	if exe == "" {
		self, err := os.Executable()
		if err == nil {
			self, err = filepath.EvalSymlinks(self)
		}
		if err != nil {
			fail("cannot find this executable: %v", err)
		}
		exe = filepath.Join(filepath.Dir(self), execScript)
	}
	if _, err := os.Stat(exe); err != nil {
		fail("missing executor %s: %v", exe, err)
	}

	host := &pythonHost{exec: exe, cancelCtx: make(chan struct{})}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if flag.NArg() > 0 {
		host.engine = flag.Arg(0)
		// Stop serving when the engine goes away, as every plugin must.
		if err := rpcutil.Healthcheck(ctx, host.engine, 5*time.Minute, stop); err != nil {
			fail("cannot watch the engine's health: %v", err)
		}
	}

	cancel := make(chan bool)
	go func() { <-ctx.Done(); close(cancel) }()
	handle, err := rpcutil.ServeWithOptions(rpcutil.ServeOptions{
		Cancel: cancel,
		Init: func(srv *grpc.Server) error {
			pulumirpc.RegisterLanguageRuntimeServer(srv, host)
			return nil
		},
	})
	if err != nil {
		fail("cannot serve: %v", err)
	}
	fmt.Printf("%d\n", handle.Port) // the CLI reads the port from the first line of stdout
	if err := <-handle.Done; err != nil {
		fail("stopped serving: %v", err)
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "pulumi-language-python: "+format+"\n", args...)
	os.Exit(1)
}

// pythonHost implements pulumirpc.LanguageRuntimeServer; what it does not implement answers
// Unimplemented through the embedded type.
type pythonHost struct {
	pulumirpc.UnimplementedLanguageRuntimeServer

	exec string // path of the exec shim

	mu        sync.Mutex
	engine    string        // the engine's gRPC address: the command-line argument, or from Handshake
	cancelCtx chan struct{} // closed by Cancel: running programs are interrupted
	cancelled bool
}

func (h *pythonHost) engineAddress() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.engine
}

func (h *pythonHost) Handshake(
	_ context.Context, req *pulumirpc.LanguageHandshakeRequest,
) (*pulumirpc.LanguageHandshakeResponse, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.engine = req.GetEngineAddress()
	return &pulumirpc.LanguageHandshakeResponse{}, nil
}

func (h *pythonHost) GetPluginInfo(context.Context, *emptypb.Empty) (*pulumirpc.PluginInfo, error) {
	return &pulumirpc.PluginInfo{Version: version.Version}, nil
}

func (h *pythonHost) Cancel(context.Context, *emptypb.Empty) (*emptypb.Empty, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.cancelled {
		h.cancelled = true
		close(h.cancelCtx)
	}
	return &emptypb.Empty{}, nil
}

// python is the interpreter a program runs with: the virtualenv's when runtime.options.virtualenv
// names one (relative to the project root, where Pulumi.yaml is), else PULUMI_PYTHON_CMD, python3 or
// python on PATH. env is the environment to run it in (the virtualenv activated).
type python struct {
	path, venv string
	env        []string
}

func resolvePython(info *pulumirpc.ProgramInfo) (*python, error) {
	opts := info.GetOptions().AsMap()
	if tc, ok := opts["toolchain"]; ok && tc != "pip" {
		return nil, fmt.Errorf("toolchain %v is not supported by this language host (only pip)", tc)
	}
	if tc, ok := opts["typechecker"]; ok {
		return nil, fmt.Errorf("typechecker %v is not supported by this language host", tc)
	}
	venv, _ := opts["virtualenv"].(string)
	if _, ok := opts["virtualenv"]; ok && venv == "" {
		return nil, errors.New("runtime option virtualenv must be a non-empty string")
	}
	if venv == "" {
		names := []string{"python3", "python"}
		if cmd := os.Getenv("PULUMI_PYTHON_CMD"); cmd != "" {
			names = []string{cmd}
		}
		for _, name := range names {
			if path, err := exec.LookPath(name); err == nil {
				return &python{path: path, env: os.Environ()}, nil
			}
		}
		return nil, fmt.Errorf("none of %v is on PATH", names)
	}
	if !filepath.IsAbs(venv) {
		venv = filepath.Join(info.GetRootDirectory(), venv)
	}
	path := filepath.Join(venv, "bin", "python")
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("the virtualenv %s has no bin/python (create it first): %w", venv, err)
	}
	// Activate it as bin/activate does: its bin first on PATH, VIRTUAL_ENV set, PYTHONHOME unset.
	env := []string{"VIRTUAL_ENV=" + venv}
	pathSet := false
	for _, kv := range os.Environ() {
		key, value, _ := strings.Cut(kv, "=")
		switch key {
		case "VIRTUAL_ENV", "PYTHONHOME":
		case "PATH":
			env = append(env, "PATH="+filepath.Join(venv, "bin")+string(os.PathListSeparator)+value)
			pathSet = true
		default:
			env = append(env, kv)
		}
	}
	if !pathSet {
		env = append(env, "PATH="+filepath.Join(venv, "bin"))
	}
	return &python{path: path, venv: venv, env: env}, nil
}

func (p *python) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, p.path, args...)
	cmd.Env = p.env
	return cmd
}

func (h *pythonHost) Run(ctx context.Context, req *pulumirpc.RunRequest) (*pulumirpc.RunResponse, error) {
	info := req.GetInfo()
	if info == nil {
		return nil, status.Error(codes.InvalidArgument, "Run needs the program's info")
	}
	if req.GetAttachDebugger() {
		return nil, status.Error(codes.Unimplemented, "this language host cannot attach a debugger")
	}
	py, err := resolvePython(info)
	if err != nil {
		return nil, err
	}
	configMap := req.GetConfig()
	if configMap == nil {
		configMap = map[string]string{} // the SDK reads PULUMI_CONFIG as a JSON object: never "null"
	}
	config, err := json.Marshal(configMap)
	if err != nil {
		return nil, err
	}
	secretKeys := req.GetConfigSecretKeys()
	if secretKeys == nil {
		secretKeys = []string{}
	}
	secrets, err := json.Marshal(secretKeys)
	if err != nil {
		return nil, err
	}

	// The shim's command line, as Pulumi's own host builds it (flags with empty values left out).
	args := []string{"-u", h.exec}
	flags := [][2]string{
		{"monitor", req.GetMonitorAddress()},
		{"engine", h.engineAddress()},
		{"project", req.GetProject()},
		{"root_directory", info.GetRootDirectory()},
		{"stack", req.GetStack()},
		{"pwd", req.GetPwd()},
		{"dry_run", strconv.FormatBool(req.GetDryRun())},
		{"parallel", strconv.Itoa(int(req.GetParallel()))},
		{"organization", req.GetOrganization()},
	}
	for _, f := range flags {
		if f[1] != "" {
			args = append(args, "--"+f[0], f[1])
		}
	}
	args = append(args, info.GetEntryPoint())
	args = append(args, req.GetArgs()...)

	// Interrupt the program when the engine cancels, or when the request itself ends.
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		select {
		case <-h.cancelCtx:
			stop()
		case <-runCtx.Done():
		}
	}()
	cmd := py.command(runCtx, args...)
	cmd.Env = append(cmd.Env, "PULUMI_CONFIG="+string(config), "PULUMI_CONFIG_SECRET_KEYS="+string(secrets))
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr // the engine shows the host's output as the program's
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 5 * time.Second

	err = cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return &pulumirpc.RunResponse{}, nil
	case errors.As(err, &exitErr) && exitErr.ExitCode() == exitShownToUser:
		return &pulumirpc.RunResponse{Bail: true}, nil
	case errors.As(err, &exitErr):
		return &pulumirpc.RunResponse{Error: fmt.Sprintf("program exited with non-zero exit code: %d",
			exitErr.ExitCode())}, nil
	default:
		return &pulumirpc.RunResponse{Error: fmt.Sprintf("could not run the language executor: %v", err)}, nil
	}
}

// listPackages prints, as JSON, each installed distribution that ships a top-level pulumi-plugin.json:
// its name, version and the file's content.
const listPackages = `import importlib.metadata as md, json, sys
found = {}
for dist in md.distributions():
    name = dist.metadata["Name"]
    for f in dist.files or []:
        if f.name == "pulumi-plugin.json" and len(f.parts) == 2 and name not in found:
            try:
                found[name] = {"dist": name, "version": dist.version, "plugin": json.loads(f.read_text())}
            except (OSError, ValueError):
                pass
json.dump(list(found.values()), sys.stdout)`

// pluginJSON is the part of pulumi-plugin.json the engine needs (Value is base64 in the file).
type pluginJSON struct {
	Resource         bool   `json:"resource"`
	Name             string `json:"name"`
	Version          string `json:"version"`
	Server           string `json:"server"`
	Parameterization *struct {
		Name    string `json:"name"`
		Version string `json:"version"`
		Value   []byte `json:"value"`
	} `json:"parameterization"`
}

// plainVersion is a release version (N.N.N) of a Python package; its plugin has the same version.
var plainVersion = regexp.MustCompile(`^\d+\.\d+\.\d+$`)

func (h *pythonHost) GetRequiredPackages(
	ctx context.Context, req *pulumirpc.GetRequiredPackagesRequest,
) (*pulumirpc.GetRequiredPackagesResponse, error) {
	py, err := resolvePython(req.GetInfo())
	if err != nil {
		return nil, err
	}
	out, err := py.command(ctx, "-c", listPackages).Output()
	if err != nil {
		return nil, fmt.Errorf("listing the Pulumi packages of %s: %w", py.path, err)
	}
	var found []struct {
		Dist, Version string
		Plugin        pluginJSON
	}
	if err := json.Unmarshal(out, &found); err != nil {
		return nil, fmt.Errorf("listing the Pulumi packages of %s: %w", py.path, err)
	}
	// Unlike Pulumi's host, packages named pulumi-* without a pulumi-plugin.json (SDKs older than
	// 2021) are not guessed at.
	var packages []*pulumirpc.PackageDependency
	for _, f := range found {
		p := f.Plugin
		if !p.Resource {
			continue
		}
		if p.Name == "" {
			p.Name = strings.TrimPrefix(f.Dist, "pulumi-")
		}
		if p.Version == "" {
			if !plainVersion.MatchString(f.Version) {
				continue // a pre-release's plugin version cannot be derived; the engine loads it on use
			}
			p.Version = f.Version
		}
		dep := &pulumirpc.PackageDependency{
			Name: p.Name, Kind: "resource", Version: "v" + strings.TrimPrefix(p.Version, "v"), Server: p.Server,
		}
		if q := p.Parameterization; q != nil {
			dep.Parameterization = &pulumirpc.PackageParameterization{Name: q.Name, Version: q.Version, Value: q.Value}
		}
		packages = append(packages, dep)
	}
	return &pulumirpc.GetRequiredPackagesResponse{Packages: packages}, nil
}

// InstallDependencies installs nothing: the virtualenv is the project's (./dev.sh creates it from
// its pins). It only checks that the program's Python can import the Pulumi SDK, and says so.
func (h *pythonHost) InstallDependencies(
	req *pulumirpc.InstallDependenciesRequest, server pulumirpc.LanguageRuntime_InstallDependenciesServer,
) error {
	py, err := resolvePython(req.GetInfo())
	if err != nil {
		return err
	}
	out, err := py.command(server.Context(), "-c", "import pulumi, sys; print(sys.version.split()[0])").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s cannot import the Pulumi SDK (install the project's dependencies first): %w\n%s",
			py.path, err, out)
	}
	msg := fmt.Sprintf("Using %s (Python %s) as it is; this language host installs no dependencies.\n",
		py.path, strings.TrimSpace(string(out)))
	return server.Send(&pulumirpc.InstallDependenciesResponse{Stdout: []byte(msg)})
}

// RuntimeOptionsPrompts asks nothing during `pulumi new`: the defaults (pip) are the only choice.
func (h *pythonHost) RuntimeOptionsPrompts(
	context.Context, *pulumirpc.RuntimeOptionsRequest,
) (*pulumirpc.RuntimeOptionsResponse, error) {
	return &pulumirpc.RuntimeOptionsResponse{}, nil
}

func (h *pythonHost) About(ctx context.Context, req *pulumirpc.AboutRequest) (*pulumirpc.AboutResponse, error) {
	info := req.GetInfo()
	if info == nil {
		info = &pulumirpc.ProgramInfo{}
	}
	py, err := resolvePython(info)
	if err != nil {
		return nil, err
	}
	out, err := py.command(ctx, "-c", "import sys; print(sys.version.split()[0])").Output()
	if err != nil {
		return nil, fmt.Errorf("running %s: %w", py.path, err)
	}
	return &pulumirpc.AboutResponse{
		Executable: py.path,
		Version:    strings.TrimSpace(string(out)),
		Metadata:   map[string]string{"toolchain": "Pip", "virtualenv": py.venv},
	}, nil
}

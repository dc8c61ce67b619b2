// kubelet-config-check validates KubeletConfiguration drop-ins with the kubelet's own code (k8s.io/kubernetes,
// the version pinned in go.mod), where no kubelet can be installed to try them:
//
//	kubelet-config-check FILE...
//
// Each FILE is read as the kubelet reads a file of its --config-dir, in the order given, over the kubelet's
// defaults: it must be a kubelet.config.k8s.io/v1beta1 KubeletConfiguration, and is decoded strictly (an
// unknown or misspelt field, a duplicate field or a wrong type is an error: the kubelet's drop-in loader
// would drop an unknown field silently); the files are merged as JSON merge patches, defaulted, converted,
// and checked by the kubelet's ValidateKubeletConfiguration with the feature gates the result sets, then as
// the kubelet parses at start what that validation lets through (manager policies, eviction thresholds,
// reservations), so a config that would stop the kubelet after it was installed is refused here.
// Prints "ok: FILE..." and exits 0, or prints every error and exits 1 (2 on usage).
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	_ "k8s.io/kubernetes/pkg/features" // registers the Kubernetes feature gates with utilfeature
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	kubeletscheme "k8s.io/kubernetes/pkg/kubelet/apis/config/scheme"
	kubeletconfigv1beta1conversion "k8s.io/kubernetes/pkg/kubelet/apis/config/v1beta1"
	"k8s.io/kubernetes/pkg/kubelet/apis/config/validation"
	evictionapi "k8s.io/kubernetes/pkg/kubelet/eviction/api"
	"sigs.k8s.io/yaml"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kubelet-config-check FILE...")
		os.Exit(2)
	}
	if err := check(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("ok:", os.Args[1:])
}

func check(files []string) error {
	scheme, strict, err := kubeletscheme.NewSchemeAndCodecs(serializer.EnableStrict)
	if err != nil {
		return err
	}
	base := &kubeletconfigv1beta1.KubeletConfiguration{}
	scheme.Default(base)
	merged, err := json.Marshal(base)
	if err != nil {
		return err
	}
	want := kubeletconfigv1beta1.SchemeGroupVersion.WithKind("KubeletConfiguration")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		if len(data) == 0 {
			return fmt.Errorf("%s: empty (the kubelet refuses an empty config file)", file)
		}
		typed := &kubeletconfigv1beta1.KubeletConfiguration{}
		_, gvk, err := strict.UniversalDeserializer().Decode(data, nil, typed)
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		if gvk == nil || *gvk != want {
			return fmt.Errorf("%s: kind %v, the kubelet reads only %v", file, gvk, want)
		}
		// What the kubelet merges: the file as it was written (unset fields absent), not the typed object.
		patch, err := yaml.YAMLToJSON(data)
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		if merged, err = jsonpatch.MergePatch(merged, patch); err != nil {
			return fmt.Errorf("%s: merge: %w", file, err)
		}
	}
	versioned := &kubeletconfigv1beta1.KubeletConfiguration{}
	if err := json.Unmarshal(merged, versioned); err != nil {
		return fmt.Errorf("merged configuration: %w", err)
	}
	kubeletconfigv1beta1conversion.SetDefaults_KubeletConfiguration(versioned)
	internal := &kubeletconfig.KubeletConfiguration{}
	if err := scheme.Convert(versioned, internal, nil); err != nil {
		return fmt.Errorf("merged configuration: %w", err)
	}
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(internal.FeatureGates); err != nil {
		return fmt.Errorf("featureGates: %w", err)
	}
	if err := validation.ValidateKubeletConfiguration(internal, utilfeature.DefaultFeatureGate); err != nil {
		return fmt.Errorf("invalid KubeletConfiguration (%v): %w", files, err)
	}
	return errors.Join(managerPolicies(internal), thresholds(internal), reservations(internal))
}

// managerPolicies refuses what ValidateKubeletConfiguration lets through and the kubelet's container manager
// refuses at start ("unknown policy"), after the node has gone NotReady: the CPU Manager's policy names
// (pkg/kubelet/cm/cpumanager, NewManager) and the Memory Manager's on Linux (pkg/kubelet/cm/memorymanager,
// NewManager; BestEffort is Windows only). Those packages pull in cadvisor, so the names are repeated here.
func managerPolicies(kc *kubeletconfig.KubeletConfiguration) error {
	var errs []string
	switch kc.CPUManagerPolicy {
	case "none", "static":
	default:
		errs = append(errs, fmt.Sprintf("cpuManagerPolicy %q must be one of: \"none\", \"static\"", kc.CPUManagerPolicy))
	}
	switch kc.MemoryManagerPolicy {
	case "None", "Static":
	default:
		errs = append(errs, fmt.Sprintf("memoryManagerPolicy %q must be one of: \"None\", \"Static\" (Linux)", kc.MemoryManagerPolicy))
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid configuration: %s", strings.Join(errs, "; "))
	}
	return nil
}

// thresholds parses evictionHard and evictionSoft as the kubelet's eviction manager does at start
// (pkg/kubelet/eviction, parseThresholdStatement: a known signal, a percentage in [0%, 100%] or a positive
// quantity), with the kubelet's own table of signals.
func thresholds(kc *kubeletconfig.KubeletConfiguration) error {
	var errs []error
	for field, statements := range map[string]map[string]string{"evictionHard": kc.EvictionHard, "evictionSoft": kc.EvictionSoft} {
		for signal, value := range statements {
			if _, ok := evictionapi.OpForSignal[evictionapi.Signal(signal)]; !ok {
				errs = append(errs, fmt.Errorf("%s: unsupported eviction signal %q", field, signal))
				continue
			}
			if percent, ok := strings.CutSuffix(value, "%"); ok {
				if f, err := strconv.ParseFloat(percent, 32); err != nil || f < 0 || f > 100 {
					errs = append(errs, fmt.Errorf("%s[%s]: %q is not a percentage from 0%% to 100%%", field, signal, value))
				}
				continue
			}
			if q, err := resource.ParseQuantity(value); err != nil || q.Sign() <= 0 {
				errs = append(errs, fmt.Errorf("%s[%s]: %q is not a positive quantity or a percentage", field, signal, value))
			}
		}
	}
	return errors.Join(errs...)
}

// reservations parses kubeReserved and systemReserved as the kubelet does at start (cmd/kubelet/app,
// parseResourceList: cpu, memory, ephemeral-storage and pid only, each a non-negative quantity).
func reservations(kc *kubeletconfig.KubeletConfiguration) error {
	var errs []error
	for field, list := range map[string]map[string]string{"kubeReserved": kc.KubeReserved, "systemReserved": kc.SystemReserved} {
		for name, value := range list {
			switch name {
			case "cpu", "memory", "ephemeral-storage", "pid":
				if q, err := resource.ParseQuantity(value); err != nil || q.Sign() < 0 {
					errs = append(errs, fmt.Errorf("%s[%s]: %q is not a non-negative quantity", field, name, value))
				}
			default:
				errs = append(errs, fmt.Errorf("%s: cannot reserve %q resource", field, name))
			}
		}
	}
	return errors.Join(errs...)
}

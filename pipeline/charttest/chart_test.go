// Package charttest checks the Helm chart in charts/webhooks: it is linted
// and rendered with the helm CLI (env HELM, which `make test` sets to a
// pinned helm it builds), and every rendered manifest is decoded strictly
// into Kubernetes API types (or, for KEDA and Prometheus Operator objects,
// local structs of the fields the chart may set) before the assertions.
package charttest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/hookpipe/hookpipe/topics"
)

const (
	chart   = "../../charts/webhooks"
	release = "hooks"
	// kubeVersion: a helm built from source defaults to an old one.
	kubeVersion = "1.30.0"
)

var components = []string{"dispatcher", "deliverer", "retrier", "recorder"}

func helm(t *testing.T) string {
	t.Helper()
	h := os.Getenv("HELM")
	if h == "" {
		t.Fatal("HELM is not set: run the chart checks through `make test`, which builds a pinned helm into .build/, or set HELM to a helm v3 binary")
	}
	if _, err := os.Stat(h); err != nil {
		t.Fatalf("HELM=%s: %v (run `make helm`)", h, err)
	}
	return h
}

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helm(t), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	out, err := cmd.Output()
	if err != nil {
		return string(out), &helmError{args: args, stderr: stderr.String(), err: err}
	}
	return string(out), nil
}

type helmError struct {
	args   []string
	stderr string
	err    error
}

func (e *helmError) Error() string {
	return "helm " + strings.Join(e.args, " ") + ": " + e.err.Error() + ": " + e.stderr
}

// manifests is a rendered release, decoded.
type manifests struct {
	deployments map[string]*appsv1.Deployment // by component
	pdbs        map[string]*policyv1.PodDisruptionBudget
	services    map[string]*corev1.Service
	hpas        map[string]*autoscalingv2.HorizontalPodAutoscaler
	scaled      map[string]*scaledObject
	configMaps  []*corev1.ConfigMap
	secrets     []*corev1.Secret // the release's, not hooks
	hookSecrets []*corev1.Secret // helm.sh/hook Secrets
	jobs        []*batchv1.Job
	cronJobs    []*batchv1.CronJob
	accounts    []*corev1.ServiceAccount
	ingresses   []*networkingv1.Ingress
	monitors    []*serviceMonitor
	rules       []*prometheusRule
	kinds       []string
}

// scaledObject is the part of KEDA's keda.sh/v1alpha1 ScaledObject the
// chart uses. Trigger metadata must be strings: KEDA rejects other types.
type scaledObject struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		ScaleTargetRef struct {
			Name string `json:"name"`
		} `json:"scaleTargetRef"`
		PollingInterval int32 `json:"pollingInterval"`
		CooldownPeriod  int32 `json:"cooldownPeriod"`
		MinReplicaCount int32 `json:"minReplicaCount"`
		MaxReplicaCount int32 `json:"maxReplicaCount"`
		Triggers        []struct {
			Type              string            `json:"type"`
			Metadata          map[string]string `json:"metadata"`
			AuthenticationRef *struct {
				Name string `json:"name"`
			} `json:"authenticationRef,omitempty"`
		} `json:"triggers"`
	} `json:"spec"`
}

// kafkaScalerKeys are the metadata keys of KEDA's Kafka scaler the chart
// may set; anything else is a typo KEDA would ignore.
var kafkaScalerKeys = []string{"bootstrapServers", "consumerGroup", "topic", "lagThreshold",
	"offsetResetPolicy", "allowIdleConsumers", "excludePersistentLag"}

type serviceMonitor struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port          string `json:"port"`
			Path          string `json:"path"`
			Interval      string `json:"interval"`
			ScrapeTimeout string `json:"scrapeTimeout"`
		} `json:"endpoints"`
	} `json:"spec"`
}

type prometheusRule struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Alert       string            `json:"alert"`
				Expr        string            `json:"expr"`
				For         string            `json:"for,omitempty"`
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	} `json:"spec"`
}

// render runs helm template with the given --set values and decodes every
// manifest strictly.
func render(t *testing.T, sets ...string) *manifests {
	t.Helper()
	out, err := template(t, sets...)
	if err != nil {
		t.Fatal(err)
	}
	m := &manifests{deployments: map[string]*appsv1.Deployment{}, pdbs: map[string]*policyv1.PodDisruptionBudget{},
		services: map[string]*corev1.Service{}, hpas: map[string]*autoscalingv2.HorizontalPodAutoscaler{},
		scaled: map[string]*scaledObject{}}
	for _, doc := range strings.Split(out, "\n---\n") {
		doc = strings.TrimSpace(strings.TrimPrefix(doc, "---"))
		if strings.Trim(doc, "\n") == "" || onlyComments(doc) {
			continue
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			t.Fatalf("not YAML: %v\n%s", err, doc)
		}
		m.kinds = append(m.kinds, tm.Kind)
		strict := func(v any) {
			t.Helper()
			if err := yaml.UnmarshalStrict([]byte(doc), v); err != nil {
				t.Fatalf("%s does not decode strictly: %v\n%s", tm.Kind, err, doc)
			}
		}
		component := func(meta metav1.ObjectMeta) string {
			c := meta.Labels["app.kubernetes.io/component"]
			if c == "" {
				t.Fatalf("%s %s has no component label", tm.Kind, meta.Name)
			}
			return c
		}
		switch tm.APIVersion + " " + tm.Kind {
		case "apps/v1 Deployment":
			var d appsv1.Deployment
			strict(&d)
			c := component(d.ObjectMeta)
			if m.deployments[c] != nil {
				t.Fatalf("two Deployments for %s", c)
			}
			m.deployments[c] = &d
		case "policy/v1 PodDisruptionBudget":
			var p policyv1.PodDisruptionBudget
			strict(&p)
			m.pdbs[component(p.ObjectMeta)] = &p
		case "v1 Service":
			var s corev1.Service
			strict(&s)
			m.services[component(s.ObjectMeta)] = &s
		case "autoscaling/v2 HorizontalPodAutoscaler":
			var h autoscalingv2.HorizontalPodAutoscaler
			strict(&h)
			m.hpas[component(h.ObjectMeta)] = &h
		case "keda.sh/v1alpha1 ScaledObject":
			var s scaledObject
			strict(&s)
			m.scaled[component(s.Metadata)] = &s
		case "v1 ConfigMap":
			var c corev1.ConfigMap
			strict(&c)
			m.configMaps = append(m.configMaps, &c)
		case "v1 Secret":
			var s corev1.Secret
			strict(&s)
			if s.Annotations["helm.sh/hook"] != "" {
				m.hookSecrets = append(m.hookSecrets, &s)
			} else {
				m.secrets = append(m.secrets, &s)
			}
		case "batch/v1 Job":
			var j batchv1.Job
			strict(&j)
			m.jobs = append(m.jobs, &j)
		case "batch/v1 CronJob":
			var j batchv1.CronJob
			strict(&j)
			m.cronJobs = append(m.cronJobs, &j)
		case "v1 ServiceAccount":
			var a corev1.ServiceAccount
			strict(&a)
			m.accounts = append(m.accounts, &a)
		case "networking.k8s.io/v1 Ingress":
			var i networkingv1.Ingress
			strict(&i)
			m.ingresses = append(m.ingresses, &i)
		case "monitoring.coreos.com/v1 ServiceMonitor":
			var s serviceMonitor
			strict(&s)
			m.monitors = append(m.monitors, &s)
		case "monitoring.coreos.com/v1 PrometheusRule":
			var r prometheusRule
			strict(&r)
			m.rules = append(m.rules, &r)
		default:
			t.Fatalf("unexpected manifest %s %s\n%s", tm.APIVersion, tm.Kind, doc)
		}
	}
	return m
}

func template(t *testing.T, sets ...string) (string, error) {
	t.Helper()
	args := []string{"template", release, chart, "--namespace", "hooks", "--kube-version", kubeVersion}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	return run(t, args...)
}

func onlyComments(doc string) bool {
	for line := range strings.Lines(doc) {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
			return false
		}
	}
	return true
}

func (m *manifests) configMap(t *testing.T) *corev1.ConfigMap {
	t.Helper()
	if len(m.configMaps) != 1 {
		t.Fatalf("%d ConfigMaps, want 1", len(m.configMaps))
	}
	return m.configMaps[0]
}

func TestLint(t *testing.T) {
	for _, sets := range [][]string{
		nil,
		{"keda.enabled=true", "serviceMonitor.enabled=true", "prometheusRule.enabled=true"},
		{"deliverer.autoscaling.cpu.enabled=true", "secrets.existingSecret=mine", "recorder.enabled=false"},
		slices.Concat(kafkaSecurity, []string{"kafka.sasl.password=sasl-pa55"}),
		slices.Concat(kafkaSecurity, []string{"secrets.existingSecret=mine"}),
		{"secrets.existingSecret=mine", "redis.url=", "deliverer.env.WEBHOOKS_DELIVERER_MAX_IN_FLIGHT=64"},
		slices.Concat(kafkaSecurity, []string{"kafka.sasl.password=sasl-pa55", "expireJob.enabled=true"}),
	} {
		args := []string{"lint", "--strict", chart, "--namespace", "hooks"}
		for _, s := range sets {
			args = append(args, "--set", s)
		}
		if out, err := run(t, args...); err != nil {
			t.Errorf("%v\n%s", err, out)
		}
	}
}

// TestDefaults: one Deployment per component, with probes on the ops
// endpoints, a grace period covering the shutdown budget, a PDB and a
// Service; the topics hook job; no autoscaling objects.
func TestDefaults(t *testing.T) {
	m := render(t)
	cm := m.configMap(t)
	httpAddr := cm.Data["WEBHOOKS_HTTP_ADDR"]
	if !regexp.MustCompile(`^:\d+$`).MatchString(httpAddr) {
		t.Fatalf("WEBHOOKS_HTTP_ADDR = %q, want :<port> (all interfaces, for the kubelet)", httpAddr)
	}
	budget, err := time.ParseDuration(cm.Data["WEBHOOKS_SHUTDOWN_TIMEOUT"])
	if err != nil {
		t.Fatalf("WEBHOOKS_SHUTDOWN_TIMEOUT: %v", err)
	}
	if len(m.deployments) != len(components)+1 || m.deployments["api"] == nil {
		t.Fatalf("Deployments for %v, want one for each of %v and the api", keys(m.deployments), components)
	}
	for _, c := range components {
		d := m.deployments[c]
		if d == nil {
			t.Fatalf("no Deployment for %s", c)
		}
		checkDeployment(t, m, c, d, httpAddr, budget)
		if d.Spec.Replicas == nil || *d.Spec.Replicas < 1 {
			t.Errorf("%s: replicas %v, want a count when nothing autoscales", c, d.Spec.Replicas)
		}
		p := m.pdbs[c]
		if p == nil {
			t.Errorf("%s: no PodDisruptionBudget", c)
		} else if !selects(p.Spec.Selector, d.Spec.Template.Labels) || (p.Spec.MaxUnavailable == nil && p.Spec.MinAvailable == nil) {
			t.Errorf("%s: PodDisruptionBudget %+v does not cover the pods %v", c, p.Spec, d.Spec.Template.Labels)
		} else if pol := p.Spec.UnhealthyPodEvictionPolicy; pol == nil || *pol != policyv1.AlwaysAllow {
			// Readiness needs Kafka (and ClickHouse): in an outage every
			// pod is unready, and the default policy would block drains.
			t.Errorf("%s: PodDisruptionBudget unhealthyPodEvictionPolicy %s, want AlwaysAllow", c, ptrString(pol))
		}
		s := m.services[c]
		if s == nil || !selects(&metav1.LabelSelector{MatchLabels: s.Spec.Selector}, d.Spec.Template.Labels) ||
			len(s.Spec.Ports) != 1 || s.Spec.Ports[0].Name != "http" || s.Spec.Ports[0].TargetPort.StrVal != "http" {
			t.Errorf("%s: no Service with an http port selecting its pods", c)
		}
	}
	if len(m.scaled) != 0 || len(m.hpas) != 0 || len(m.monitors) != 0 || len(m.rules) != 0 {
		t.Errorf("defaults render autoscaling or monitoring objects: %v", m.kinds)
	}

	if len(m.jobs) != 1 {
		t.Fatalf("%d Jobs, want the topics hook job", len(m.jobs))
	}
	j := m.jobs[0]
	if hook := j.Annotations["helm.sh/hook"]; hook != "pre-install,pre-upgrade" {
		t.Errorf("topics job hook %q, want pre-install,pre-upgrade", hook)
	}
	if cmd := strings.Join(j.Spec.Template.Spec.Containers[0].Command, " "); !strings.HasPrefix(cmd, "webhookctl topics ensure --partitions=12") {
		t.Errorf("topics job runs %q", cmd)
	}
	env := map[string]string{}
	for _, e := range j.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	for _, k := range []string{"WEBHOOKS_KAFKA_BROKERS", "WEBHOOKS_TOPIC_PREFIX", "WEBHOOKS_RETRY_TIERS"} {
		if env[k] != cm.Data[k] {
			t.Errorf("topics job %s = %q, ConfigMap says %q", k, env[k], cm.Data[k])
		}
	}
	if len(j.Spec.Template.Spec.Containers[0].EnvFrom) != 0 {
		t.Error("the topics job reads the ConfigMap or Secret, which a pre-install hook runs before")
	}
	for k := range env {
		if strings.HasPrefix(k, "WEBHOOKS_KAFKA_TLS") || strings.HasPrefix(k, "WEBHOOKS_KAFKA_SASL") {
			t.Errorf("topics job sets %s with TLS and SASL off", k)
		}
	}
	if len(j.Spec.Template.Spec.Volumes) != 0 || len(m.hookSecrets) != 0 {
		t.Errorf("with TLS and SASL off the topics job has volumes %v and there are %d hook Secrets",
			j.Spec.Template.Spec.Volumes, len(m.hookSecrets))
	}

	if len(m.secrets) != 1 {
		t.Fatalf("%d Secrets, want 1", len(m.secrets))
	}
	key, err := base64.StdEncoding.DecodeString(string(m.secrets[0].Data["WEBHOOKS_SECRETS_KEY"]))
	if err != nil || len(key) != 32 {
		t.Errorf("generated WEBHOOKS_SECRETS_KEY is not base64 of 32 bytes (%d bytes, %v)", len(key), err)
	}
	if m.secrets[0].Annotations["helm.sh/resource-policy"] != "keep" {
		t.Error("the Secret holding the generated key is deleted on uninstall")
	}
}

// checkDeployment checks what every component's Deployment needs.
func checkDeployment(t *testing.T, m *manifests, c string, d *appsv1.Deployment, httpAddr string, budget time.Duration) {
	t.Helper()
	spec := d.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		t.Fatalf("%s: %d containers", c, len(spec.Containers))
	}
	ct := spec.Containers[0]
	if !slices.Equal(ct.Command, []string{c}) {
		t.Errorf("%s: command %v, want [%s]", c, ct.Command, c)
	}
	if !selects(d.Spec.Selector, d.Spec.Template.Labels) {
		t.Errorf("%s: selector %v does not match its pod labels %v", c, d.Spec.Selector, d.Spec.Template.Labels)
	}
	port := int32(-1)
	for _, p := range ct.Ports {
		if p.Name == "http" {
			port = p.ContainerPort
		}
	}
	if ":"+strconv.Itoa(int(port)) != httpAddr {
		t.Errorf("%s: http port %d, but the components listen on WEBHOOKS_HTTP_ADDR=%s", c, port, httpAddr)
	}
	for _, probe := range []struct {
		name string
		p    *corev1.Probe
		path string
	}{{"liveness", ct.LivenessProbe, "/healthz"}, {"readiness", ct.ReadinessProbe, "/readyz"}} {
		if probe.p == nil || probe.p.HTTPGet == nil {
			t.Errorf("%s: no HTTP %s probe", c, probe.name)
			continue
		}
		g := probe.p.HTTPGet
		if g.Path != probe.path || (g.Port.StrVal != "http" && g.Port.IntVal != port) {
			t.Errorf("%s: %s probe GET %s on port %v, want %s on the http port (%d)", c, probe.name, g.Path, g.Port.String(), probe.path, port)
		}
	}
	// The final commit after the budget takes up to 10s.
	if g := spec.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second < budget+10*time.Second {
		t.Errorf("%s: terminationGracePeriodSeconds %s, want at least the shutdown budget %v plus 10s", c, ptrString(g), budget)
	}
	var fromCM, fromSecret bool
	for _, e := range ct.EnvFrom {
		if e.ConfigMapRef != nil && e.ConfigMapRef.Name == m.configMap(t).Name {
			fromCM = true
		}
		if e.SecretRef != nil && (len(m.secrets) == 0 || e.SecretRef.Name == m.secrets[0].Name) {
			fromSecret = true
		}
	}
	if !fromCM || !fromSecret {
		t.Errorf("%s: env from ConfigMap %v, from Secret %v; want both", c, fromCM, fromSecret)
	}
	if sc := ct.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("%s: root filesystem is writable", c)
	}
	if d.Annotations["hookpipe.io/consumer-group"] != "webhooks-"+c {
		t.Errorf("%s: consumer group annotation %q", c, d.Annotations["hookpipe.io/consumer-group"])
	}
}

// TestNoSecretInConfigMap: secret values land in the Secret only.
func TestNoSecretInConfigMap(t *testing.T) {
	secrets := map[string]string{
		"WEBHOOKS_SECRETS_KEY":         "c2VjcmV0LWtleS1mb3ItdGhlLWNoYXJ0LXRlc3QtMzI=",
		"WEBHOOKS_REDIS_URL":           "redis://:redis-pa55@redis:6379/0",
		"WEBHOOKS_CLICKHOUSE_PASSWORD": "ch-pa55",
		"WEBHOOKS_KAFKA_SASL_PASSWORD": "sasl-pa55",
	}
	m := render(t, "secrets.secretsKey="+secrets["WEBHOOKS_SECRETS_KEY"], "redis.url="+secrets["WEBHOOKS_REDIS_URL"],
		"clickhouse.password="+secrets["WEBHOOKS_CLICKHOUSE_PASSWORD"], "kafka.sasl.enabled=true",
		"kafka.sasl.username=hooks", "kafka.sasl.password="+secrets["WEBHOOKS_KAFKA_SASL_PASSWORD"],
		"kafka.tls.enabled=true", "kafka.tls.secretName=kafka-ca")
	cm := m.configMap(t)
	for k, v := range cm.Data {
		if _, secret := secrets[k]; secret {
			t.Errorf("ConfigMap has %s", k)
		}
		for name, secret := range secrets {
			if strings.Contains(v, secret) {
				t.Errorf("ConfigMap %s carries the value of %s", k, name)
			}
		}
	}
	if len(m.secrets) != 1 {
		t.Fatalf("%d Secrets, want 1", len(m.secrets))
	}
	for name, want := range secrets {
		if got := string(m.secrets[0].Data[name]); got != want {
			t.Errorf("Secret %s = %q, want %q", name, got, want)
		}
	}
	if cm.Data["WEBHOOKS_KAFKA_SASL_USERNAME"] != "hooks" || cm.Data["WEBHOOKS_KAFKA_TLS"] != "true" {
		t.Errorf("SASL username and TLS settings missing from the ConfigMap: %v", cm.Data)
	}

	if _, err := template(t, "config.extra.WEBHOOKS_SOMETHING_PASSWORD=x"); err == nil || !strings.Contains(err.Error(), "looks like a secret") {
		t.Errorf("a secret-looking config.extra key rendered (err %v)", err)
	}

	m = render(t, "secrets.existingSecret=mine")
	if len(m.secrets) != 0 {
		t.Errorf("with existingSecret the chart still renders %d Secrets", len(m.secrets))
	}
	for c, d := range m.deployments {
		var ok bool
		for _, e := range d.Spec.Template.Spec.Containers[0].EnvFrom {
			ok = ok || (e.SecretRef != nil && e.SecretRef.Name == "mine")
		}
		if !ok {
			t.Errorf("%s does not read the existing Secret", c)
		}
	}
}

// TestExistingSecretRedisURL: with secrets.existingSecret the components
// still get a Redis URL, never none (which falls back to
// redis://127.0.0.1:6379/0 and runs without breakers, rate limits and
// dedup): redis.url in the ConfigMap, overridden by a WEBHOOKS_REDIS_URL in
// the existing Secret; or, with redis.url empty, the Secret's key as a
// required secretKeyRef. A redis.url with credentials is refused rather
// than put in the ConfigMap.
func TestExistingSecretRedisURL(t *testing.T) {
	m := render(t, "secrets.existingSecret=mine", "redis.url=redis://redis.data:6379/2")
	if got := m.configMap(t).Data["WEBHOOKS_REDIS_URL"]; got != "redis://redis.data:6379/2" {
		t.Errorf("ConfigMap WEBHOOKS_REDIS_URL = %q, want redis.url", got)
	}
	for c, d := range m.deployments {
		ct := d.Spec.Template.Spec.Containers[0]
		cmAt, secretAt := -1, -1
		for i, e := range ct.EnvFrom {
			if e.ConfigMapRef != nil {
				cmAt = i
			}
			if e.SecretRef != nil && e.SecretRef.Name == "mine" {
				secretAt = i
			}
		}
		if cmAt < 0 || secretAt < cmAt {
			t.Errorf("%s: envFrom %+v; want the existing Secret after the ConfigMap, so its WEBHOOKS_REDIS_URL wins", c, ct.EnvFrom)
		}
		for _, e := range ct.Env {
			if e.Name == "WEBHOOKS_REDIS_URL" {
				t.Errorf("%s: env sets WEBHOOKS_REDIS_URL (%+v) over redis.url and the existing Secret", c, e)
			}
		}
	}

	m = render(t, "secrets.existingSecret=mine", "redis.url=", "deliverer.env.WEBHOOKS_DELIVERER_MAX_IN_FLIGHT=64")
	if got, ok := m.configMap(t).Data["WEBHOOKS_REDIS_URL"]; ok {
		t.Errorf("redis.url empty: ConfigMap WEBHOOKS_REDIS_URL = %q, want it from the existing Secret only", got)
	}
	for c, d := range m.deployments {
		env := map[string]corev1.EnvVar{}
		for _, e := range d.Spec.Template.Spec.Containers[0].Env {
			env[e.Name] = e
		}
		e, ok := env["WEBHOOKS_REDIS_URL"]
		if !ok || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			t.Errorf("%s: WEBHOOKS_REDIS_URL = %+v, want a secretKeyRef", c, e)
			continue
		}
		if ref := e.ValueFrom.SecretKeyRef; ref.Name != "mine" || ref.Key != "WEBHOOKS_REDIS_URL" || (ref.Optional != nil && *ref.Optional) {
			t.Errorf("%s: WEBHOOKS_REDIS_URL from %+v, want the required key WEBHOOKS_REDIS_URL of Secret mine", c, ref)
		}
		if c == "deliverer" && env["WEBHOOKS_DELIVERER_MAX_IN_FLIGHT"].Value != "64" {
			t.Errorf("deliverer: lost its env entries: %+v", d.Spec.Template.Spec.Containers[0].Env)
		}
	}

	const password = "redis-pa55"
	for _, tc := range []struct {
		sets []string
		want string
	}{
		{[]string{"secrets.existingSecret=mine", "redis.url=redis://:" + password + "@redis:6379/0"}, "redis.url carries credentials"},
		{[]string{"redis.url="}, "redis.url is required"},
	} {
		_, err := template(t, tc.sets...)
		var he *helmError
		if !errors.As(err, &he) || !strings.Contains(he.stderr, tc.want) {
			t.Errorf("%v: err %v, want a refusal saying %q", tc.sets, err, tc.want)
		} else if strings.Contains(he.stderr, password) {
			t.Errorf("%v: the refusal shows the password: %s", tc.sets, he.stderr)
		}
	}
}

// kafkaSecurity turns on Kafka TLS and SASL, without the password.
var kafkaSecurity = []string{"kafka.tls.enabled=true", "kafka.tls.secretName=kafka-tls-certs",
	"kafka.sasl.enabled=true", "kafka.sasl.mechanism=SCRAM-SHA-256", "kafka.sasl.username=hooks"}

// TestTopicsJobKafkaSecurity: the topics hook job, which runs before the
// release's ConfigMap and Secret exist, gets the TLS and SASL settings
// itself: the ConfigMap's values as env entries, the TLS Secret mounted
// where the Deployments mount it, and the SASL password from a
// secretKeyRef (never a literal): secrets.existingSecret, or else a hook
// Secret created before the job and only rendered when needed.
func TestTopicsJobKafkaSecurity(t *testing.T) {
	const password = "sasl-pa55"
	for _, tc := range []struct {
		name     string
		sets     []string
		existing string // secrets.existingSecret
	}{
		{"chart Secret", []string{"kafka.sasl.password=" + password}, ""},
		{"existing Secret", []string{"secrets.existingSecret=mine"}, "mine"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := render(t, slices.Concat(kafkaSecurity, tc.sets)...)
			cm := m.configMap(t)
			if len(m.jobs) != 1 {
				t.Fatalf("%d Jobs, want the topics hook job", len(m.jobs))
			}
			j := m.jobs[0]
			pod := j.Spec.Template.Spec
			ct := pod.Containers[0]
			if len(ct.EnvFrom) != 0 {
				t.Error("the topics job reads the ConfigMap or Secret, which a pre-install hook runs before")
			}
			env := map[string]corev1.EnvVar{}
			for _, e := range ct.Env {
				if _, dup := env[e.Name]; dup {
					t.Errorf("topics job sets %s twice", e.Name)
				}
				env[e.Name] = e
			}
			for _, k := range []string{"WEBHOOKS_KAFKA_BROKERS", "WEBHOOKS_TOPIC_PREFIX", "WEBHOOKS_RETRY_TIERS",
				"WEBHOOKS_KAFKA_TLS", "WEBHOOKS_KAFKA_TLS_DIR", "WEBHOOKS_KAFKA_SASL_MECHANISM", "WEBHOOKS_KAFKA_SASL_USERNAME"} {
				want, ok := cm.Data[k]
				if !ok {
					t.Errorf("ConfigMap lacks %s", k)
				}
				if e, ok := env[k]; !ok || e.Value != want || e.ValueFrom != nil {
					t.Errorf("topics job %s = %+v, ConfigMap says %q", k, e, want)
				}
			}
			if cm.Data["WEBHOOKS_KAFKA_TLS"] != "true" || cm.Data["WEBHOOKS_KAFKA_SASL_MECHANISM"] != "SCRAM-SHA-256" ||
				cm.Data["WEBHOOKS_KAFKA_SASL_USERNAME"] != "hooks" {
				t.Errorf("ConfigMap TLS and SASL settings: %v", cm.Data)
			}

			// The password: a secretKeyRef, never a literal.
			pw, ok := env["WEBHOOKS_KAFKA_SASL_PASSWORD"]
			if !ok || pw.Value != "" || pw.ValueFrom == nil || pw.ValueFrom.SecretKeyRef == nil {
				t.Fatalf("topics job WEBHOOKS_KAFKA_SASL_PASSWORD = %+v, want a secretKeyRef", pw)
			}
			ref := pw.ValueFrom.SecretKeyRef
			if ref.Key != "WEBHOOKS_KAFKA_SASL_PASSWORD" || (ref.Optional != nil && *ref.Optional) {
				t.Errorf("password secretKeyRef %+v, want the required key WEBHOOKS_KAFKA_SASL_PASSWORD", ref)
			}
			spec, err := yaml.Marshal(j)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(spec), password) || strings.Contains(string(spec), base64.StdEncoding.EncodeToString([]byte(password))) {
				t.Error("the topics Job carries the SASL password")
			}
			if tc.existing != "" {
				if ref.Name != tc.existing {
					t.Errorf("password from Secret %q, want secrets.existingSecret %q", ref.Name, tc.existing)
				}
				if len(m.hookSecrets) != 0 || len(m.secrets) != 0 {
					t.Errorf("with existingSecret: %d hook Secrets and %d Secrets, want none", len(m.hookSecrets), len(m.secrets))
				}
			} else {
				if len(m.hookSecrets) != 1 {
					t.Fatalf("%d hook Secrets, want 1 holding the password for the topics job", len(m.hookSecrets))
				}
				hs := m.hookSecrets[0]
				if ref.Name != hs.Name {
					t.Errorf("password from Secret %q, want the hook Secret %q", ref.Name, hs.Name)
				}
				if got := string(hs.Data["WEBHOOKS_KAFKA_SASL_PASSWORD"]); got != password || len(hs.Data) != 1 {
					t.Errorf("hook Secret data %v, want only WEBHOOKS_KAFKA_SASL_PASSWORD=%q", keys(hs.Data), password)
				}
				if hs.Annotations["helm.sh/hook"] != j.Annotations["helm.sh/hook"] {
					t.Errorf("hook Secret runs on %q, the job on %q", hs.Annotations["helm.sh/hook"], j.Annotations["helm.sh/hook"])
				}
				sw, err1 := strconv.Atoi(hs.Annotations["helm.sh/hook-weight"])
				jw, err2 := strconv.Atoi(j.Annotations["helm.sh/hook-weight"])
				if err1 != nil || err2 != nil || sw >= jw {
					t.Errorf("hook weights: Secret %q, job %q; want the Secret created first",
						hs.Annotations["helm.sh/hook-weight"], j.Annotations["helm.sh/hook-weight"])
				}
				policy := strings.Split(hs.Annotations["helm.sh/hook-delete-policy"], ",")
				if !slices.Contains(policy, "before-hook-creation") || !slices.Contains(policy, "hook-succeeded") {
					t.Errorf("hook Secret delete policy %v, want before-hook-creation and hook-succeeded", policy)
				}
				if _, keep := hs.Annotations["helm.sh/resource-policy"]; keep {
					t.Error("the hook Secret is kept")
				}
				if len(m.secrets) != 1 || string(m.secrets[0].Data["WEBHOOKS_KAFKA_SASL_PASSWORD"]) != password {
					t.Errorf("the release Secret lost the password (%d Secrets)", len(m.secrets))
				}
			}

			// TLS: the job mounts the Secret where the Deployments do.
			dir := cm.Data["WEBHOOKS_KAFKA_TLS_DIR"]
			jobMounts, jobVolumes := tlsMount(t, "topics job", pod, dir)
			if len(jobVolumes) != 1 || jobVolumes[0].Secret == nil || jobVolumes[0].Secret.SecretName != "kafka-tls-certs" {
				t.Errorf("topics job volumes %+v, want the Secret kafka-tls-certs", jobVolumes)
			}
			for c, d := range m.deployments {
				mounts, volumes := tlsMount(t, c, d.Spec.Template.Spec, dir)
				if !equalYAML(t, mounts, jobMounts) || !equalYAML(t, volumes, jobVolumes) {
					t.Errorf("%s mounts %+v %+v, the topics job %+v %+v", c, mounts, volumes, jobMounts, jobVolumes)
				}
			}
		})
	}

	// TLS alone: no password, no hook Secret.
	m := render(t, "kafka.tls.enabled=true", "kafka.tls.secretName=kafka-tls-certs")
	if len(m.hookSecrets) != 0 {
		t.Errorf("TLS without SASL renders %d hook Secrets", len(m.hookSecrets))
	}
	if len(m.jobs) != 1 {
		t.Fatalf("%d Jobs, want the topics hook job", len(m.jobs))
	}
	for _, e := range m.jobs[0].Spec.Template.Spec.Containers[0].Env {
		if strings.HasPrefix(e.Name, "WEBHOOKS_KAFKA_SASL") {
			t.Errorf("TLS without SASL: the topics job sets %s", e.Name)
		}
	}
	tlsMount(t, "topics job", m.jobs[0].Spec.Template.Spec, m.configMap(t).Data["WEBHOOKS_KAFKA_TLS_DIR"])

	// No job, no hook Secret.
	m = render(t, slices.Concat(kafkaSecurity, []string{"kafka.sasl.password=" + password, "topicsJob.enabled=false"})...)
	if len(m.jobs) != 0 || len(m.hookSecrets) != 0 {
		t.Errorf("topicsJob.enabled=false: %d Jobs and %d hook Secrets", len(m.jobs), len(m.hookSecrets))
	}

	// The job would wait for a password that no Secret holds.
	if _, err := template(t, kafkaSecurity...); err == nil || !strings.Contains(err.Error(), "kafka.sasl.password") {
		t.Errorf("SASL without a password or existingSecret rendered (err %v)", err)
	}
	if _, err := template(t, "kafka.tls.enabled=true"); err == nil || !strings.Contains(err.Error(), "kafka.tls.secretName") {
		t.Errorf("TLS without a Secret rendered (err %v)", err)
	}
}

// tlsMount returns the pod's one container's volume mounts and the pod's
// volumes, after checking that the container mounts exactly one volume,
// read-only at dir.
func tlsMount(t *testing.T, who string, pod corev1.PodSpec, dir string) ([]corev1.VolumeMount, []corev1.Volume) {
	t.Helper()
	if dir == "" {
		t.Fatalf("%s: no WEBHOOKS_KAFKA_TLS_DIR", who)
	}
	mounts := pod.Containers[0].VolumeMounts
	if len(mounts) != 1 || mounts[0].MountPath != dir || !mounts[0].ReadOnly {
		t.Errorf("%s: volume mounts %+v, want one read-only at %s", who, mounts, dir)
		return mounts, pod.Volumes
	}
	var found bool
	for _, v := range pod.Volumes {
		found = found || v.Name == mounts[0].Name
	}
	if !found {
		t.Errorf("%s: mounts volume %q, which the pod does not have (%+v)", who, mounts[0].Name, pod.Volumes)
	}
	return mounts, pod.Volumes
}

func equalYAML(t *testing.T, a, b any) bool {
	t.Helper()
	ya, err := yaml.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	yb, err := yaml.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(ya, yb)
}

// TestKEDA: one ScaledObject per component on its own group and topics,
// never more replicas than partitions, held retries excluded; the
// Deployments leave the replica count to KEDA.
func TestKEDA(t *testing.T) {
	m := render(t, "keda.enabled=true", "kafka.partitions=8", "keda.triggerAuthentication=kafka-auth")
	cm := m.configMap(t)
	prefix := cm.Data["WEBHOOKS_TOPIC_PREFIX"]
	var tiers []string
	for _, d := range strings.Split(cm.Data["WEBHOOKS_RETRY_TIERS"], ",") {
		tiers = append(tiers, prefix+"retry."+d)
	}
	wantTopics := map[string][]string{
		"dispatcher": {prefix + "events"},
		"deliverer":  {prefix + "deliveries.high", prefix + "deliveries", prefix + "deliveries.low", prefix + "redeliveries"},
		"retrier":    tiers,
		"recorder":   {prefix + "attempts"},
	}
	if len(m.scaled) != len(components) || len(m.hpas) != 0 {
		t.Fatalf("ScaledObjects for %v and %d HPAs, want one ScaledObject per component", keys(m.scaled), len(m.hpas))
	}
	for _, c := range components {
		s, d := m.scaled[c], m.deployments[c]
		if s == nil || d == nil {
			t.Fatalf("%s: ScaledObject %v, Deployment %v", c, s != nil, d != nil)
		}
		if s.Spec.ScaleTargetRef.Name != d.Name {
			t.Errorf("%s: scales %q, want its Deployment %q", c, s.Spec.ScaleTargetRef.Name, d.Name)
		}
		if d.Spec.Replicas != nil {
			t.Errorf("%s: Deployment sets replicas %d, which would fight KEDA on upgrades", c, *d.Spec.Replicas)
		}
		if s.Spec.MaxReplicaCount < 1 || s.Spec.MaxReplicaCount > 8 || s.Spec.MinReplicaCount < 0 || s.Spec.MinReplicaCount > s.Spec.MaxReplicaCount {
			t.Errorf("%s: replicas %d..%d, want within 1..8 (the partitions)", c, s.Spec.MinReplicaCount, s.Spec.MaxReplicaCount)
		}
		var topics []string
		for _, tr := range s.Spec.Triggers {
			md := tr.Metadata
			topics = append(topics, md["topic"])
			if tr.Type != "kafka" || md["consumerGroup"] != "webhooks-"+c || md["bootstrapServers"] != cm.Data["WEBHOOKS_KAFKA_BROKERS"] {
				t.Errorf("%s: trigger %s on group %q, brokers %q", c, tr.Type, md["consumerGroup"], md["bootstrapServers"])
			}
			if md["lagThreshold"] == "" || tr.AuthenticationRef == nil || tr.AuthenticationRef.Name != "kafka-auth" {
				t.Errorf("%s: trigger %v without lagThreshold or authenticationRef", c, md)
			}
			if (md["excludePersistentLag"] == "true") != (c == "retrier") {
				t.Errorf("%s: excludePersistentLag %q; want true exactly on the retry tiers", c, md["excludePersistentLag"])
			}
			for k := range md {
				if !slices.Contains(kafkaScalerKeys, k) {
					t.Errorf("%s: trigger metadata %q is not a Kafka scaler parameter", c, k)
				}
			}
		}
		if !slices.Equal(topics, wantTopics[c]) {
			t.Errorf("%s: triggers on %v, want %v", c, topics, wantTopics[c])
		}
	}

	saslPassword := "kafka.sasl.password=sasl-pa55"
	for _, tc := range []struct {
		sets []string
		want string // in the refusal; empty: renders
	}{
		{[]string{"keda.enabled=true", "kafka.partitions=4", "deliverer.autoscaling.maxReplicas=5"}, "deliverer.autoscaling.maxReplicas (5) is more than kafka.partitions"},
		{[]string{"keda.enabled=true", "retrier.autoscaling.minReplicas=0"}, "retrier.autoscaling.minReplicas must be at least 1"},
		// The deliverer's default minReplicas is 2.
		{[]string{"keda.enabled=true", "kafka.partitions=1"}, "deliverer.autoscaling.minReplicas (2) is more than its most replicas (1"},
		{[]string{"keda.enabled=true", "dispatcher.autoscaling.minReplicas=4", "dispatcher.autoscaling.maxReplicas=3"}, "dispatcher.autoscaling.minReplicas (4) is more than its most replicas (3"},
		{[]string{"keda.enabled=true", "kafka.partitions=2"}, ""},
		// KEDA's scaler would connect without TLS or SASL and never read the lag.
		{slices.Concat(kafkaSecurity, []string{saslPassword, "keda.enabled=true"}), "keda.triggerAuthentication is required with kafka.tls.enabled or kafka.sasl.enabled"},
		{[]string{"kafka.tls.enabled=true", "kafka.tls.secretName=kafka-tls-certs", "keda.enabled=true"}, "keda.triggerAuthentication is required"},
		{[]string{"kafka.sasl.enabled=true", "kafka.sasl.username=hooks", saslPassword, "keda.enabled=true"}, "keda.triggerAuthentication is required"},
		{slices.Concat(kafkaSecurity, []string{saslPassword, "keda.enabled=true", "keda.triggerAuthentication=kafka-auth"}), ""},
		{slices.Concat(kafkaSecurity, []string{saslPassword}), ""},
	} {
		_, err := template(t, tc.sets...)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v", tc.sets, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: err %v, want a refusal saying %q", tc.sets, err, tc.want)
		}
	}
}

// TestRetryTiers: the chart names the retrier's KEDA triggers after
// kafka.retryTiers as written, while the components name each tier topic
// with topics.FormatDelay. So the chart accepts exactly the tiers written
// that way and refuses the others, naming the canonical form of those
// written in whole hours, minutes and seconds.
func TestRetryTiers(t *testing.T) {
	hms := regexp.MustCompile(`^([0-9]+h)?([0-9]+m)?([0-9]+s)?$`)
	for _, tier := range []string{"60s", "1m", "90m", "1h30m", "1h5s", "1h0m5s", "1h0m", "3600s", "05m", "0s", "500ms", "2000ms", "1.5m", "25h", "59m59s"} {
		d, parseErr := time.ParseDuration(tier)
		valid := parseErr == nil && d >= time.Second && d%time.Second == 0
		canonical := valid && topics.FormatDelay(d) == tier
		// --set splits on unescaped commas.
		out, err := template(t, "keda.enabled=true", `kafka.retryTiers=5s\,`+tier)
		switch {
		case canonical && err != nil:
			t.Errorf("tier %q, as FormatDelay writes it, refused: %v", tier, err)
		case canonical:
			if !strings.Contains(out, "topic: webhooks.retry."+tier+"\n") {
				t.Errorf("tier %q: no KEDA trigger on webhooks.retry.%s", tier, tier)
			}
		case err == nil && !valid:
			t.Errorf("tier %q rendered; the components refuse it", tier)
		case err == nil:
			t.Errorf("tier %q rendered; the components name its topic retry.%s", tier, topics.FormatDelay(d))
		case !strings.Contains(err.Error(), "kafka.retryTiers"):
			t.Errorf("tier %q: refusal %v does not name kafka.retryTiers", tier, err)
		case valid && hms.MatchString(tier) && !strings.Contains(err.Error(), strconv.Quote(topics.FormatDelay(d))):
			t.Errorf("tier %q: refusal %v does not name the form %q", tier, err, topics.FormatDelay(d))
		}
	}

	// The default, and the list the components read, trigger by trigger.
	m := render(t, "keda.enabled=true")
	cm := m.configMap(t)
	if cm.Data["WEBHOOKS_RETRY_TIERS"] != topics.DefaultRetryTiers {
		t.Errorf("default WEBHOOKS_RETRY_TIERS %q, the components default to %q", cm.Data["WEBHOOKS_RETRY_TIERS"], topics.DefaultRetryTiers)
	}
	names, err := topics.NewNames(cm.Data["WEBHOOKS_TOPIC_PREFIX"], cm.Data["WEBHOOKS_RETRY_TIERS"])
	if err != nil {
		t.Fatal(err)
	}
	var triggered []string
	for _, tr := range m.scaled["retrier"].Spec.Triggers {
		triggered = append(triggered, tr.Metadata["topic"])
	}
	if !slices.Equal(triggered, names.RetryTopics()) {
		t.Errorf("retrier triggers on %v, the components consume %v", triggered, names.RetryTopics())
	}

	if _, err := template(t, `kafka.retryTiers= \, `); err == nil || !strings.Contains(err.Error(), "at least one tier") {
		t.Errorf("an empty kafka.retryTiers rendered (err %v)", err)
	}
}

func TestCPUAutoscaling(t *testing.T) {
	if _, err := template(t, "deliverer.autoscaling.cpu.enabled=true", "deliverer.autoscaling.maxReplicas=1"); err == nil ||
		!strings.Contains(err.Error(), "deliverer.autoscaling.minReplicas (2) is more than its most replicas (1") {
		t.Errorf("an HPA with minReplicas above maxReplicas rendered (err %v)", err)
	}

	m := render(t, "deliverer.autoscaling.cpu.enabled=true", "recorder.enabled=false")
	if len(m.hpas) != 1 || m.hpas["deliverer"] == nil {
		t.Fatalf("HPAs for %v, want the deliverer's only", keys(m.hpas))
	}
	h, d := m.hpas["deliverer"], m.deployments["deliverer"]
	if h.Spec.ScaleTargetRef.Name != d.Name || h.Spec.MaxReplicas != 12 || d.Spec.Replicas != nil {
		t.Errorf("HPA targets %q up to %d (Deployment replicas %v); want %q up to 12, Deployment without replicas",
			h.Spec.ScaleTargetRef.Name, h.Spec.MaxReplicas, d.Spec.Replicas, d.Name)
	}
	if m.deployments["dispatcher"].Spec.Replicas == nil {
		t.Error("the dispatcher lost its replica count")
	}
	if m.deployments["recorder"] != nil || m.pdbs["recorder"] != nil {
		t.Error("recorder.enabled=false still renders the recorder")
	}
}

// TestMonitoring: the ServiceMonitor scrapes every component's Service;
// every alert rule uses metrics the components export and has a runbook
// (docs/operations.md).
func TestMonitoring(t *testing.T) {
	m := render(t, "serviceMonitor.enabled=true", "prometheusRule.enabled=true", "prometheusRule.labels.release=prom")
	if len(m.monitors) != 1 || len(m.rules) != 1 {
		t.Fatalf("%d ServiceMonitors and %d PrometheusRules, want 1 each", len(m.monitors), len(m.rules))
	}
	sm := m.monitors[0]
	for c, s := range m.services {
		if !selects(&sm.Spec.Selector, s.Labels) {
			t.Errorf("ServiceMonitor does not select the %s Service", c)
		}
	}
	if ep := sm.Spec.Endpoints; len(ep) != 1 || ep[0].Port != "http" || ep[0].Path != "/metrics" {
		t.Errorf("ServiceMonitor endpoints %+v", ep)
	}
	readme, err := os.ReadFile(filepath.Join(chart, "..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	r := m.rules[0]
	if r.Metadata.Labels["release"] != "prom" {
		t.Error("prometheusRule.labels not applied")
	}
	alerts := map[string]bool{}
	metric := regexp.MustCompile(`webhooks_[a-z_]+`)
	for _, g := range r.Spec.Groups {
		for _, rule := range g.Rules {
			alerts[rule.Alert] = true
			for _, name := range metric.FindAllString(rule.Expr, -1) {
				if !strings.Contains(string(readme), "`"+name+"`") {
					t.Errorf("alert %s uses %s, which docs/operations.md does not list as a metric", rule.Alert, name)
				}
			}
			if !strings.Contains(string(readme), "\n### "+rule.Alert+"\n") {
				t.Errorf("alert %s has no runbook (### %s) in docs/operations.md", rule.Alert, rule.Alert)
			}
			if rule.Annotations["summary"] == "" || rule.Labels["severity"] == "" {
				t.Errorf("alert %s lacks a summary or severity", rule.Alert)
			}
		}
	}
	for _, a := range []string{"WebhooksDeliveryFailureRateHigh", "WebhooksDeadLettersGrowing", "WebhooksConsumerLagHigh",
		"WebhooksRetriesOverdue", "WebhooksRetrierWindowOverrun", "WebhooksRecorderClickHouseDown", "WebhooksBreakerOpenTooLong",
		"WebhooksOrderedKeyHeldLong"} {
		if !alerts[a] {
			t.Errorf("no alert %s", a)
		}
	}
}

// templateVar is a Grafana dashboard variable.
type templateVar struct {
	Name  string
	Query json.RawMessage
}

// TestGrafanaDashboards: the dashboards come in one ConfigMap with the
// sidecar's label; they are Grafana JSON whose every panel reads a
// datasource variable, and every metric they query is one
// docs/operations.md lists; the ClickHouse one queries the configured
// database's views, and only when asked.
func TestGrafanaDashboards(t *testing.T) {
	if m := render(t); len(m.configMaps) != 1 {
		t.Fatalf("dashboards rendered by default: %d ConfigMaps", len(m.configMaps))
	}
	m := render(t, "grafanaDashboards.enabled=true", "grafanaDashboards.clickhouse=true", "clickhouse.database=hooks_prod",
		"grafanaDashboards.annotations.grafana_folder=hookpipe")
	var cm *corev1.ConfigMap
	for _, c := range m.configMaps {
		if strings.HasSuffix(c.Name, "-grafana-dashboards") {
			cm = c
		}
	}
	if cm == nil || cm.Labels["grafana_dashboard"] != "1" || cm.Annotations["grafana_folder"] != "hookpipe" {
		t.Fatalf("dashboard ConfigMap %+v", cm)
	}
	ops, err := os.ReadFile(filepath.Join(chart, "..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	metric := regexp.MustCompile(`webhooks_[a-z_]+`)
	type panel struct {
		Title      string
		Type       string
		Datasource struct{ UID string }
		Targets    []struct {
			Expr   string
			RawSQL string `json:"rawSql"`
		}
	}
	for name, want := range map[string]string{"hookpipe.json": "${datasource}", "hookpipe-clickhouse.json": "${clickhouse}"} {
		var d struct {
			UID        string
			Panels     []panel
			Templating struct {
				List []templateVar
			}
		}
		if err := json.Unmarshal([]byte(cm.Data[name]), &d); err != nil || d.UID == "" || len(d.Panels) < 4 {
			t.Fatalf("%s: %v, %d panels", name, err, len(d.Panels))
		}
		if name == "hookpipe-clickhouse.json" && !slices.ContainsFunc(d.Templating.List, func(v templateVar) bool {
			return v.Name == "database" && string(v.Query) == `"hooks_prod"`
		}) {
			t.Errorf("%s: the database variable is not the configured database: %+v", name, d.Templating.List)
		}
		for _, p := range d.Panels {
			if p.Type == "row" {
				continue
			}
			if p.Datasource.UID != want || len(p.Targets) == 0 {
				t.Errorf("%s: panel %q reads %q with %d queries", name, p.Title, p.Datasource.UID, len(p.Targets))
			}
			for _, q := range p.Targets {
				for _, m := range metric.FindAllString(q.Expr, -1) {
					m = strings.TrimSuffix(m, "_bucket")
					if !strings.Contains(string(ops), "`"+m+"`") {
						t.Errorf("%s: panel %q queries %s, which docs/operations.md does not list", name, p.Title, m)
					}
				}
				if q.RawSQL != "" && !strings.Contains(q.RawSQL, "FROM ${database}.") {
					t.Errorf("%s: panel %q does not read the database variable: %s", name, p.Title, q.RawSQL)
				}
			}
		}
	}
	if m := render(t, "grafanaDashboards.enabled=true"); len(m.configMaps) != 2 {
		t.Fatalf("%d ConfigMaps with the dashboards, want 2", len(m.configMaps))
	} else {
		for _, c := range m.configMaps {
			if _, ok := c.Data["hookpipe-clickhouse.json"]; ok {
				t.Error("the ClickHouse dashboard rendered without grafanaDashboards.clickhouse")
			}
		}
	}
}

func ptrString[T any](p *T) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}

func selects(sel *metav1.LabelSelector, labels map[string]string) bool {
	if sel == nil || len(sel.MatchLabels) == 0 {
		return false
	}
	for k, v := range sel.MatchLabels {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestAPI: the API runs as its own Deployment behind a ClusterIP Service on
// its port, with the probes and metrics port of the components, the
// bootstrap admin key from the Secret, and, when asked, an Ingress and a
// CPU HPA; it is no consumer group (no KEDA object).
func TestAPI(t *testing.T) {
	m := render(t, "secrets.apiAdminKey=hpk_0123456789012345678901234567890123456789abc",
		"api.ingress.enabled=true", "api.ingress.host=hooks.example.com", "api.autoscaling.enabled=true", "keda.enabled=true")
	d := m.deployments["api"]
	if d == nil {
		t.Fatal("no api Deployment")
	}
	c := d.Spec.Template.Spec.Containers[0]
	if len(c.Command) != 1 || c.Command[0] != "api" || d.Spec.Replicas != nil {
		t.Errorf("api container %v, replicas %v (an HPA scales it)", c.Command, d.Spec.Replicas)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	if env["WEBHOOKS_API_ADDR"] != "0.0.0.0:8080" {
		t.Errorf("WEBHOOKS_API_ADDR = %q", env["WEBHOOKS_API_ADDR"])
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Error("api probes missing")
	}
	if s := m.services["api"]; s == nil || s.Spec.ClusterIP == "None" || len(s.Spec.Ports) != 2 || s.Spec.Ports[0].Port != 8080 {
		t.Errorf("api Service %+v", s)
	}
	if len(m.secrets) != 1 || string(m.secrets[0].Data["WEBHOOKS_API_ADMIN_KEY"]) == "" {
		t.Error("the admin key is not in the Secret")
	}
	if len(m.ingresses) != 1 || m.ingresses[0].Spec.Rules[0].Host != "hooks.example.com" ||
		m.ingresses[0].Spec.Rules[0].HTTP.Paths[0].Backend.Service.Port.Name != "api" {
		t.Errorf("ingresses %+v", m.ingresses)
	}
	if m.hpas["api"] == nil || m.pdbs["api"] == nil || m.scaled["api"] != nil {
		t.Errorf("api HPA %v, PDB %v, ScaledObject %v", m.hpas["api"] != nil, m.pdbs["api"] != nil, m.scaled["api"] != nil)
	}
	if off := render(t, "api.enabled=false"); off.deployments["api"] != nil || off.services["api"] != nil {
		t.Error("api.enabled=false still renders the API")
	}
}

// TestTracing: tracing.otlpEndpoint reaches every component as
// OTEL_EXPORTER_OTLP_ENDPOINT through the shared ConfigMap; unset, tracing
// stays off; a collector token is refused in config.extra (it would land
// in the ConfigMap).
func TestTracing(t *testing.T) {
	if _, ok := render(t).configMap(t).Data["OTEL_EXPORTER_OTLP_ENDPOINT"]; ok {
		t.Error("tracing on by default")
	}
	m := render(t, "tracing.otlpEndpoint=http://otel-collector:4318")
	cm := m.configMap(t)
	if got := cm.Data["OTEL_EXPORTER_OTLP_ENDPOINT"]; got != "http://otel-collector:4318" {
		t.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT = %q", got)
	}
	for c, d := range m.deployments {
		var ok bool
		for _, e := range d.Spec.Template.Spec.Containers[0].EnvFrom {
			ok = ok || (e.ConfigMapRef != nil && e.ConfigMapRef.Name == cm.Name)
		}
		if !ok {
			t.Errorf("%s does not read the ConfigMap", c)
		}
	}
	if _, err := template(t, "config.extra.OTEL_EXPORTER_OTLP_HEADERS=x"); err == nil ||
		!strings.Contains(err.Error(), "looks like a secret") {
		t.Errorf("a collector token in config.extra rendered (err %v)", err)
	}
}

// TestPlainTemplate: helm template without --kube-version renders (for
// helm's default version, older than 1.27: no unhealthyPodEvictionPolicy),
// and with 1.27 the PodDisruptionBudgets have it.
func TestPlainTemplate(t *testing.T) {
	out, err := run(t, "template", release, chart)
	if err != nil {
		t.Fatalf("plain helm template: %v", err)
	}
	if !strings.Contains(out, "kind: PodDisruptionBudget") || strings.Contains(out, "unhealthyPodEvictionPolicy") {
		t.Errorf("for helm's default version: PodDisruptionBudget %v, unhealthyPodEvictionPolicy %v",
			strings.Contains(out, "kind: PodDisruptionBudget"), strings.Contains(out, "unhealthyPodEvictionPolicy"))
	}
	out, err = run(t, "template", release, chart, "--kube-version", "1.27.0")
	if err != nil || !strings.Contains(out, "unhealthyPodEvictionPolicy: AlwaysAllow") {
		t.Errorf("for 1.27: %v, unhealthyPodEvictionPolicy %v", err, strings.Contains(out, "unhealthyPodEvictionPolicy"))
	}
}

// TestExpireCronJob: off by default; on, a CronJob runs webhookctl
// clickhouse expire --wait with the default retention given, one run at a
// time, bounded, with the components' ConfigMap and Secret (the tenants
// topic and ClickHouse) and their Kafka TLS mount.
func TestExpireCronJob(t *testing.T) {
	if m := render(t); len(m.cronJobs) != 0 {
		t.Fatalf("defaults render %d CronJobs, want none", len(m.cronJobs))
	}
	m := render(t, slices.Concat(kafkaSecurity, []string{"kafka.sasl.password=sasl-pa55", "expireJob.enabled=true",
		"expireJob.defaultDays=30", "expireJob.schedule=5 2 * * *"})...)
	if len(m.cronJobs) != 1 {
		t.Fatalf("%d CronJobs, want the expire job", len(m.cronJobs))
	}
	cj := m.cronJobs[0]
	if cj.Spec.Schedule != "5 2 * * *" || cj.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent {
		t.Errorf("schedule %q, concurrency %q; want 5 2 * * *, Forbid", cj.Spec.Schedule, cj.Spec.ConcurrencyPolicy)
	}
	job := cj.Spec.JobTemplate.Spec
	if job.ActiveDeadlineSeconds == nil || *job.ActiveDeadlineSeconds != 3600 {
		t.Errorf("activeDeadlineSeconds %v, want 3600", job.ActiveDeadlineSeconds)
	}
	pod := job.Template.Spec
	ct := pod.Containers[0]
	if cmd := strings.Join(ct.Command, " "); cmd != "webhookctl clickhouse expire --default-days=30 --wait --timeout=3600s" {
		t.Errorf("runs %q", cmd)
	}
	d := m.deployments["recorder"]
	if d == nil {
		t.Fatal("no recorder Deployment")
	}
	if !equalYAML(t, ct.EnvFrom, d.Spec.Template.Spec.Containers[0].EnvFrom) {
		t.Errorf("envFrom %+v, the recorder's %+v", ct.EnvFrom, d.Spec.Template.Spec.Containers[0].EnvFrom)
	}
	dir := m.configMap(t).Data["WEBHOOKS_KAFKA_TLS_DIR"]
	mounts, volumes := tlsMount(t, "expire job", pod, dir)
	dm, dv := tlsMount(t, "recorder", d.Spec.Template.Spec, dir)
	if !equalYAML(t, mounts, dm) || !equalYAML(t, volumes, dv) {
		t.Errorf("expire job mounts %+v %+v, the recorder %+v %+v", mounts, volumes, dm, dv)
	}
	if pod.RestartPolicy != corev1.RestartPolicyOnFailure || ct.SecurityContext == nil {
		t.Errorf("restart policy %q, security context %v", pod.RestartPolicy, ct.SecurityContext)
	}
}

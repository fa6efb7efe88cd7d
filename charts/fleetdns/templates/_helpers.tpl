{{/* vim: set filetype=mustache: */}}

{{- define "fleetdns.kubeSystem" -}}
{{- if eq .Values.mode "kubeSystem" }}true{{ else if eq .Values.mode "gslb" }}{{ else }}{{ fail (printf "mode: %q is neither kubeSystem nor gslb" .Values.mode) }}{{ end -}}
{{- end -}}

{{- define "fleetdns.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The objects' name: the stock one (coredns) for kubeSystem; for gslb the
CoreDNS chart's release-name-chart-name rule, with -gslb (release fleetdns:
fleetdns-gslb, as deploy/gslb).
*/}}
{{- define "fleetdns.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if include "fleetdns.kubeSystem" . -}}
coredns
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- $base := .Release.Name -}}
{{- if not (contains $name .Release.Name) }}{{ $base = printf "%s-%s" .Release.Name $name }}{{ end -}}
{{- printf "%s-gslb" $base | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "fleetdns.component" -}}
{{- if include "fleetdns.kubeSystem" . }}kube-system{{ else }}gslb{{ end -}}
{{- end -}}

{{/*
The pods' selector. kubeSystem: exactly the stock Deployment's (k8s-app:
kube-dns), which is immutable; gslb: name, instance and component.
*/}}
{{- define "fleetdns.selectorLabels" -}}
{{- if include "fleetdns.kubeSystem" . -}}
k8s-app: kube-dns
{{- else -}}
app.kubernetes.io/name: {{ include "fleetdns.name" . }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/component: gslb
{{- end -}}
{{- end -}}

{{- define "fleetdns.labels" -}}
{{ include "fleetdns.labelsBase" . }}
app.kubernetes.io/component: {{ include "fleetdns.component" . }}
{{- end -}}

{{/* Every label but the component. */}}
{{- define "fleetdns.labelsBase" -}}
{{- if include "fleetdns.kubeSystem" . -}}
k8s-app: kube-dns
{{ end -}}
app.kubernetes.io/name: {{ include "fleetdns.name" . }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | replace ":" "-" | replace "@" "_" | trunc 63 | trimSuffix "-" | quote }}
helm.sh/chart: "{{ .Chart.Name }}-{{ .Chart.Version | replace "+" "_" }}"
{{- with .Values.customLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "fleetdns.annotations" -}}
{{- with .Values.customAnnotations }}
annotations:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
The stock-named objects of kube-system (Deployment, Service, ServiceAccount,
system:coredns) outlive `helm uninstall`: the cluster DNS must not go with
the release. Their annotations, with customAnnotations.
*/}}
{{- define "fleetdns.stockAnnotations" -}}
{{- $a := merge (dict) .Values.customAnnotations -}}
{{- if include "fleetdns.kubeSystem" . }}{{ $_ := set $a "helm.sh/resource-policy" "keep" }}{{ end -}}
{{- with $a }}
annotations:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "fleetdns.serviceAccountName" -}}
{{- if .Values.serviceAccount.name -}}
{{ .Values.serviceAccount.name }}
{{- else if not .Values.serviceAccount.create -}}
default
{{- else -}}
{{ include "fleetdns.fullname" . }}
{{- end -}}
{{- end -}}

{{- define "fleetdns.serviceName" -}}
{{- if .Values.service.name }}{{ .Values.service.name }}{{ else if include "fleetdns.kubeSystem" . }}kube-dns{{ else }}{{ include "fleetdns.fullname" . }}{{ end -}}
{{- end -}}

{{- define "fleetdns.serviceType" -}}
{{- if .Values.serviceType }}{{ .Values.serviceType }}{{ else if include "fleetdns.kubeSystem" . }}ClusterIP{{ else }}LoadBalancer{{ end -}}
{{- end -}}

{{- define "fleetdns.priorityClassName" -}}
{{- if .Values.priorityClassName }}{{ .Values.priorityClassName }}{{ else if include "fleetdns.kubeSystem" . }}system-cluster-critical{{ end -}}
{{- end -}}

{{/* The servers: .Values.servers, else the mode's. As YAML. */}}
{{- define "fleetdns.servers" -}}
{{- $servers := .Values.servers -}}
{{- if not $servers }}{{ $servers = ternary .Values.kubeSystem.servers .Values.gslb.servers (eq .Values.mode "kubeSystem") }}{{ end -}}
{{- $d := .Values.gslb.dnssec -}}
{{- if and (ne .Values.mode "kubeSystem") $d $d.keySecret }}
{{- /* gslb.dnssec.keySecret: a dnssec block in front of localtargets, gslb and k8scrd (the first of them in the block). */}}
{{- $files := list }}
{{- range $d.keys }}{{ $files = append $files (printf "/etc/fleetdns/dnssec/%s" .) }}{{ end }}
{{- if not $files }}{{ fail "gslb.dnssec.keys: name the key files of gslb.dnssec.keySecret (e.g. ksk, zsk)" }}{{ end }}
{{- $block := printf "key file %s\ncache_capacity %v" (join " " $files) (int $d.cacheCapacity) }}
{{- $out := list }}
{{- range $servers }}
{{- $zones := list }}
{{- range .zones }}{{ $zones = append $zones .zone }}{{ end }}
{{- $plugins := list }}
{{- $done := false }}
{{- range .plugins }}
{{- if and (not $done) (has .name (list "localtargets" "gslb" "k8scrd")) }}
{{- $plugins = append $plugins (dict "name" "dnssec" "parameters" (join " " $zones) "configBlock" $block) }}
{{- $done = true }}
{{- end }}
{{- $plugins = append $plugins . }}
{{- end }}
{{- $out = append $out (merge (dict "plugins" $plugins) .) }}
{{- end }}
{{- $servers = $out }}
{{- end }}
{{- toYaml $servers -}}
{{- end -}}

{{/* The Corefile, rendered from the servers as the CoreDNS chart does. */}}
{{- define "fleetdns.corefile" -}}
{{- range (include "fleetdns.servers" . | fromYamlArray) }}
{{- $port := .port -}}
{{- $keys := list -}}
{{- range (default (list (dict "zone" ".")) .zones) }}
{{- $k := printf "%s%s" (default "" .scheme) (default "." .zone) -}}
{{- if $port }}{{ $k = printf "%s:%v" $k $port }}{{ end -}}
{{- $keys = append $keys $k -}}
{{- end }}
{{ join " " $keys }} {
{{- range .plugins }}
    {{ .name }}{{ if .parameters }} {{ .parameters }}{{ end }}{{ if .configBlock }} {
{{ .configBlock | indent 8 }}
    }{{ end }}
{{- end }}
}
{{- end }}
{{- end -}}

{{/*
The versioned ConfigMap's name: the full name and a hash of the Corefile (as
kustomize's configMapGenerator), so that every Corefile is a ConfigMap of its
own and each ReplicaSet keeps the one its pods ran.
*/}}
{{- define "fleetdns.configMapName" -}}
{{- printf "%s-%s" (include "fleetdns.fullname" .) (include "fleetdns.corefile" . | trim | sha256sum | trunc 10) -}}
{{- end -}}

{{/*
What the servers' k8scrd blocks read, as JSON: namespaces (empty: all) and
kinds (resources; default DNSEndpoint).
*/}}
{{- define "fleetdns.sources" -}}
{{- $nss := list -}}
{{- $kinds := list -}}
{{- $all := false -}}
{{- $any := false -}}
{{- range (include "fleetdns.servers" . | fromYamlArray) }}
{{- range .plugins }}
{{- if eq .name "k8scrd" }}
{{- $any = true -}}
{{- $block := regexReplaceAll "#.*" (default "" .configBlock) "" -}}
{{- $ns := regexFind "(?m)^[ \t]*namespaces[ \t]+.*$" $block | trim -}}
{{- if $ns }}{{ $nss = concat $nss (rest (regexSplit "[ \t]+" $ns -1)) }}{{ else }}{{ $all = true }}{{ end -}}
{{- $res := regexFind "(?m)^[ \t]*resources[ \t]+.*$" $block | trim -}}
{{- if $res }}{{ $kinds = concat $kinds (rest (regexSplit "[ \t]+" $res -1)) }}{{ else }}{{ $kinds = append $kinds "DNSEndpoint" }}{{ end -}}
{{- end }}
{{- end }}
{{- end }}
{{- if $all }}{{ $nss = list }}{{ end -}}
{{- dict "any" $any "namespaces" ($nss | uniq | sortAlpha) "kinds" ($kinds | uniq) | toJson -}}
{{- end -}}

{{/*
The ports of the servers: [{port, servicePort, udp, tcp, nodePort}], as
JSON. UDP for dns:// (the default), TCP with use_tcp and for tls://,
grpc:// and https://, as the CoreDNS chart.
*/}}
{{- define "fleetdns.dnsPorts" -}}
{{- $seen := dict -}}
{{- $out := list -}}
{{- range (include "fleetdns.servers" . | fromYamlArray) }}
{{- $p := toString (default 53 .port) -}}
{{- if not (hasKey $seen $p) }}
{{- $_ := set $seen $p true -}}
{{- $tcp := false -}}
{{- $udp := false -}}
{{- range (default (list (dict)) .zones) }}
{{- $scheme := default "" .scheme -}}
{{- if has $scheme (list "" "dns://") }}{{ $udp = true }}{{ if .use_tcp }}{{ $tcp = true }}{{ end }}{{ end -}}
{{- if has $scheme (list "tls://" "grpc://" "https://") }}{{ $tcp = true }}{{ end -}}
{{- end -}}
{{- $out = append $out (dict "port" (int $p) "servicePort" (int (default $p .servicePort)) "udp" $udp "tcp" $tcp "nodePort" (default 0 .nodePort)) -}}
{{- end }}
{{- end }}
{{- toJson $out -}}
{{- end -}}

{{/* The prometheus plugin's port (9153 if absent). */}}
{{- define "fleetdns.metricsPort" -}}
{{- $port := "" -}}
{{- range (include "fleetdns.servers" . | fromYamlArray) }}
{{- range .plugins }}
{{- if and (eq .name "prometheus") (not $port) }}{{ $port = default ":9153" .parameters | toString | splitList ":" | last }}{{ end -}}
{{- end }}
{{- end }}
{{- default "9153" $port -}}
{{- end -}}

# Applied by tools/build.sh to the concatenated stages (kwok-stages.yaml): node-initialize, the stage that
# makes a Node Ready, skips Nodes labelled kwok.k8s-node-pools.io/hold-not-ready, so a test can hold a Node
# NotReady (with its not-ready taint) as a real node is before its CNI runs. Every other Node is unchanged.
/^  name: node-initialize$/,/^    matchExpressions:$/{
  /^    matchExpressions:$/a\
    - key: '.metadata.labels."kwok.k8s-node-pools.io/hold-not-ready"'\
      operator: 'DoesNotExist'
}

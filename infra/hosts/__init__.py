"""The Ansible edge: what each host is given (hostvars, read by ansible/preflight.yml through
`python -m infra hostvars`), running a playbook and reading its recap (ansible_run), the main job's host
stages on sandbox hosts (stages), and the parser of the GPU report the playbooks print (gpu_report).
"""

# bash completion for ampx: commands, each command's options, model files and backends.
# Installed as share/bash-completion/completions/ampx.
_ampx() {
    local cur prev cmd
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD - 1]}
    cmd=${COMP_WORDS[1]}
    local commands="backends conformance train eval policy generate export predict diff tokenize bench plot trace-summary help"
    if [ "$COMP_CWORD" -eq 1 ]; then
        COMPREPLY=($(compgen -W "$commands --help --version" -- "$cur"))
        return
    fi
    case $prev in
    --backend) COMPREPLY=($(compgen -W "cpu opencl cuda" -- "$cur") $(compgen -f -X '!*.so' -- "$cur")); return ;;
    --policy | --checkpoint | --resume | --metrics | --trace | --init-from | --input | -o | --out) COMPREPLY=($(compgen -f -- "$cur")); return ;;
    --tokenizer | --llmc-out | --val-out) COMPREPLY=($(compgen -f -- "$cur")); return ;;
    --dtype) COMPREPLY=($(compgen -W "f32 bf16 f16" -- "$cur")); return ;;
    esac
    local opts
    case $cmd in
    train) opts="--backend --backend-opt --policy --set --init-from --transpose-linear --steps --batch --accumulate --seed --log-every --eval-every --metrics --checkpoint --checkpoint-every --keep --resume --trace --trace-steps --monitor --quiet --max-input-bytes --help" ;;
    eval) opts="--backend --backend-opt --policy --set --checkpoint --help" ;;
    policy) opts="--policy --set --search --budget --tolerance -o --backend --backend-opt --help" ;;
    export) opts="--checkpoint -o --out --format --dtype --backend --backend-opt --help" ;;
    predict) opts="--checkpoint --input -o --backend --backend-opt --set --help" ;;
    diff) opts="--backend --backend-opt --steps --policy --set --all --help" ;;
    generate) opts="--checkpoint --prompt --tokens --temperature --top-k --seed --samples --shift --no-cache --quiet --tokenizer --eot --backend --backend-opt --help" ;;
    tokenize)
        if [ "$COMP_CWORD" -eq 2 ]; then
            COMPREPLY=($(compgen -W "train encode decode --help" -- "$cur"))
            return
        fi
        case ${COMP_WORDS[2]} in
        train) opts="--vocab --out --llmc-out --help" ;;
        encode) opts="--tokenizer --out --val-fraction --val-out --separator --help" ;;
        *) opts="--tokenizer --out --help" ;;
        esac
        [[ $cur == -* ]] || { COMPREPLY=($(compgen -f -- "$cur")); return; } ;;
    conformance) opts="--backend --backend-opt --op --quick --seed --json --all --help" ;;
    backends) opts="--json --options --help" ;;
    bench) opts="gemm op --backend --backend-opt --dtype --m --n --k --trans-a --trans-b --json --tune --help" ;;
    help) COMPREPLY=($(compgen -W "$commands" -- "$cur")); return ;;
    *) opts="--help" ;;
    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    else
        COMPREPLY=($(compgen -f -X '!*.@(json|jsonl)' -- "$cur") $(compgen -d -- "$cur"))
    fi
}
complete -o filenames -F _ampx ampx

/* nn/f64names.h — the double-precision names of the generic functions, types and tables: each
 * name that a generic source file (nn/real.h) or header (nn/nn.h) defines or declares, renamed
 * to name_f64 when it is compiled as double. No include guard: included plainly it defines the
 * renames; with NB_F64_NAMES_UNDO defined it removes them again. nn/real.h includes it under
 * -DNB_F64; nn/nn.h around its second, double-precision pass over the generic headers.
 *
 * A new generic function, type or table adds its line to both lists (in C order: LC_ALL=C sort).
 * The library's build checks them (tools/f64names.sh): every external symbol of a double object
 * must end in _f64 and be its float object's symbol plus the suffix, the two lists must name the
 * same names, and each name must occur in nn/. A generic declaration with no rename already fails
 * to compile (nn/nn.h then declares it twice, as float and as double). */

#ifndef NB_F64_NAMES_UNDO
#define nb_adam_step nb_adam_step_f64
#define nb_adam_step_layout nb_adam_step_layout_f64
#define nb_batchnorm_backward nb_batchnorm_backward_f64
#define nb_batchnorm_backward_set nb_batchnorm_backward_set_f64
#define nb_batchnorm_forward nb_batchnorm_forward_f64
#define nb_clip_global nb_clip_global_f64
#define nb_clip_per_tensor nb_clip_per_tensor_f64
#define nb_cnn nb_cnn_f64
#define nb_cnn_backward nb_cnn_backward_f64
#define nb_cnn_data_init nb_cnn_data_init_f64
#define nb_cnn_exact_grads nb_cnn_exact_grads_f64
#define nb_cnn_flops nb_cnn_flops_f64
#define nb_cnn_forward nb_cnn_forward_f64
#define nb_cnn_free nb_cnn_free_f64
#define nb_cnn_grads_finish nb_cnn_grads_finish_f64
#define nb_cnn_init nb_cnn_init_f64
#define nb_cnn_layer nb_cnn_layer_f64
#define nb_cnn_zero_grad nb_cnn_zero_grad_f64
#define nb_col_sums nb_col_sums_f64
#define nb_conv2d_backward nb_conv2d_backward_f64
#define nb_conv2d_backward_prec nb_conv2d_backward_prec_f64
#define nb_conv2d_forward nb_conv2d_forward_f64
#define nb_conv2d_forward_prec nb_conv2d_forward_prec_f64
#define nb_conv2d_scratch nb_conv2d_scratch_f64
#define nb_dense_backward nb_dense_backward_f64
#define nb_dense_forward nb_dense_forward_f64
#define nb_draw nb_draw_f64
#define nb_draw_backward nb_draw_backward_f64
#define nb_draw_bce_backward nb_draw_bce_backward_f64
#define nb_draw_bce_forward nb_draw_bce_forward_f64
#define nb_draw_filterbank_backward nb_draw_filterbank_backward_f64
#define nb_draw_filterbank_forward nb_draw_filterbank_forward_f64
#define nb_draw_forward nb_draw_forward_f64
#define nb_draw_free nb_draw_free_f64
#define nb_draw_generate nb_draw_generate_f64
#define nb_draw_init nb_draw_init_f64
#define nb_draw_init_params nb_draw_init_params_f64
#define nb_draw_latent_backward nb_draw_latent_backward_f64
#define nb_draw_latent_forward nb_draw_latent_forward_f64
#define nb_draw_read_backward nb_draw_read_backward_f64
#define nb_draw_read_forward nb_draw_read_forward_f64
#define nb_draw_write_backward nb_draw_write_backward_f64
#define nb_draw_write_forward nb_draw_write_forward_f64
#define nb_dropout_backward nb_dropout_backward_f64
#define nb_dropout_forward nb_dropout_forward_f64
#define nb_dropout_forward_at nb_dropout_forward_at_f64
#define nb_dyt_backward nb_dyt_backward_f64
#define nb_dyt_backward_set nb_dyt_backward_set_f64
#define nb_dyt_forward nb_dyt_forward_f64
#define nb_gap_backward nb_gap_backward_f64
#define nb_gap_forward nb_gap_forward_f64
#define nb_gauss_noise_forward nb_gauss_noise_forward_f64
#define nb_gauss_noise_forward_at nb_gauss_noise_forward_at_f64
#define nb_gpt nb_gpt_f64
#define nb_gpt_backward nb_gpt_backward_f64
#define nb_gpt_decay nb_gpt_decay_f64
#define nb_gpt_forward nb_gpt_forward_f64
#define nb_gpt_free nb_gpt_free_f64
#define nb_gpt_init_params nb_gpt_init_params_f64
#define nb_gpt_logits nb_gpt_logits_f64
#define nb_gpt_new nb_gpt_new_f64
#define nb_gpt_set_shard nb_gpt_set_shard_f64
#define nb_gpt_step_flops nb_gpt_step_flops_f64
#define nb_gru nb_gru_f64
#define nb_gru_backward nb_gru_backward_f64
#define nb_gru_backward_seq nb_gru_backward_seq_f64
#define nb_gru_begin nb_gru_begin_f64
#define nb_gru_finish_back nb_gru_finish_back_f64
#define nb_gru_forward nb_gru_forward_f64
#define nb_gru_free nb_gru_free_f64
#define nb_gru_init_normal nb_gru_init_normal_f64
#define nb_gru_init_params nb_gru_init_params_f64
#define nb_gru_input nb_gru_input_f64
#define nb_gru_input_back nb_gru_input_back_f64
#define nb_gru_last nb_gru_last_f64
#define nb_gru_setup nb_gru_setup_f64
#define nb_gru_step nb_gru_step_f64
#define nb_gru_step_back nb_gru_step_back_f64
#define nb_l2abs_backward nb_l2abs_backward_f64
#define nb_l2abs_forward nb_l2abs_forward_f64
#define nb_l2norm nb_l2norm_f64
#define nb_layernorm_backward nb_layernorm_backward_f64
#define nb_layernorm_backward_set nb_layernorm_backward_set_f64
#define nb_layernorm_forward nb_layernorm_forward_f64
#define nb_leaky_relu_backward nb_leaky_relu_backward_f64
#define nb_leaky_relu_forward nb_leaky_relu_forward_f64
#define nb_lstm nb_lstm_f64
#define nb_lstm_back_begin nb_lstm_back_begin_f64
#define nb_lstm_backward nb_lstm_backward_f64
#define nb_lstm_begin nb_lstm_begin_f64
#define nb_lstm_dh nb_lstm_dh_f64
#define nb_lstm_final nb_lstm_final_f64
#define nb_lstm_finish_back nb_lstm_finish_back_f64
#define nb_lstm_forward nb_lstm_forward_f64
#define nb_lstm_free nb_lstm_free_f64
#define nb_lstm_h nb_lstm_h_f64
#define nb_lstm_init nb_lstm_init_f64
#define nb_lstm_init_params nb_lstm_init_params_f64
#define nb_lstm_step nb_lstm_step_f64
#define nb_lstm_step_back nb_lstm_step_back_f64
#define nb_map_affine_backward nb_map_affine_backward_f64
#define nb_map_affine_forward nb_map_affine_forward_f64
#define nb_map_batchnorm_backward nb_map_batchnorm_backward_f64
#define nb_map_batchnorm_forward nb_map_batchnorm_forward_f64
#define nb_map_batchnorm_sync_backward nb_map_batchnorm_sync_backward_f64
#define nb_map_layernorm_backward nb_map_layernorm_backward_f64
#define nb_map_layernorm_forward nb_map_layernorm_forward_f64
#define nb_map_rmsnorm_backward nb_map_rmsnorm_backward_f64
#define nb_map_rmsnorm_forward nb_map_rmsnorm_forward_f64
#define nb_maxpool2_backward nb_maxpool2_backward_f64
#define nb_maxpool2_forward nb_maxpool2_forward_f64
#define nb_mlp nb_mlp_f64
#define nb_mlp_backward nb_mlp_backward_f64
#define nb_mlp_data_init nb_mlp_data_init_f64
#define nb_mlp_forward nb_mlp_forward_f64
#define nb_mlp_free nb_mlp_free_f64
#define nb_mlp_init nb_mlp_init_f64
#define nb_mlp_zero_grad nb_mlp_zero_grad_f64
#define nb_norm_ops nb_norm_ops_f64
#define nb_norm_ops_batch nb_norm_ops_batch_f64
#define nb_norm_ops_dyt nb_norm_ops_dyt_f64
#define nb_norm_ops_layer nb_norm_ops_layer_f64
#define nb_norm_ops_prms nb_norm_ops_prms_f64
#define nb_norm_ops_rms nb_norm_ops_rms_f64
#define nb_oe nb_oe_f64
#define nb_oe_backward nb_oe_backward_f64
#define nb_oe_backward_embeddings nb_oe_backward_embeddings_f64
#define nb_oe_encode_captions nb_oe_encode_captions_f64
#define nb_oe_encode_images nb_oe_encode_images_f64
#define nb_oe_forward nb_oe_forward_f64
#define nb_oe_free nb_oe_free_f64
#define nb_oe_init nb_oe_init_f64
#define nb_order_errors nb_order_errors_f64
#define nb_order_loss nb_order_loss_f64
#define nb_order_loss_backward nb_order_loss_backward_f64
#define nb_orthogonal nb_orthogonal_f64
#define nb_reader nb_reader_f64
#define nb_reader_backward nb_reader_backward_f64
#define nb_reader_forward nb_reader_forward_f64
#define nb_reader_free nb_reader_free_f64
#define nb_reader_init nb_reader_init_f64
#define nb_relu_backward nb_relu_backward_f64
#define nb_relu_forward nb_relu_forward_f64
#define nb_rmsnorm_backward nb_rmsnorm_backward_f64
#define nb_rmsnorm_backward_set nb_rmsnorm_backward_set_f64
#define nb_rmsnorm_forward nb_rmsnorm_forward_f64
#define nb_rnnsearch nb_rnnsearch_f64
#define nb_rnnsearch_backward nb_rnnsearch_backward_f64
#define nb_rnnsearch_beam nb_rnnsearch_beam_f64
#define nb_rnnsearch_dec_init nb_rnnsearch_dec_init_f64
#define nb_rnnsearch_dec_step nb_rnnsearch_dec_step_f64
#define nb_rnnsearch_encode nb_rnnsearch_encode_f64
#define nb_rnnsearch_forward nb_rnnsearch_forward_f64
#define nb_rnnsearch_free nb_rnnsearch_free_f64
#define nb_rnnsearch_greedy nb_rnnsearch_greedy_f64
#define nb_rnnsearch_init nb_rnnsearch_init_f64
#define nb_rs_dense nb_rs_dense_f64
#define nb_rs_norm nb_rs_norm_f64
#define nb_sigmoid_backward nb_sigmoid_backward_f64
#define nb_sigmoid_forward nb_sigmoid_forward_f64
#define nb_softmax_xent_backward nb_softmax_xent_backward_f64
#define nb_softmax_xent_backward_over nb_softmax_xent_backward_over_f64
#define nb_softmax_xent_forward nb_softmax_xent_forward_f64
#define nb_tanh_backward nb_tanh_backward_f64
#define nb_tanh_forward nb_tanh_forward_f64
#define nb_tf nb_tf_f64
#define nb_tf_backward nb_tf_backward_f64
#define nb_tf_config nb_tf_config_f64
#define nb_tf_forward nb_tf_forward_f64
#define nb_tf_free nb_tf_free_f64
#define nb_tf_gemm_shapes nb_tf_gemm_shapes_f64
#define nb_tf_incremental_logprobs nb_tf_incremental_logprobs_f64
#define nb_tf_init_params nb_tf_init_params_f64
#define nb_tf_logits nb_tf_logits_f64
#define nb_tf_new nb_tf_new_f64
#define nb_tf_set_shard nb_tf_set_shard_f64
#define nb_tf_step_flops nb_tf_step_flops_f64
#define nb_tf_tensors nb_tf_tensors_f64
#define nb_tf_translate nb_tf_translate_f64
#define nb_weightnorm_backward nb_weightnorm_backward_f64
#define nb_weightnorm_forward nb_weightnorm_forward_f64
#define nb_wino_backward nb_wino_backward_f64
#define nb_wino_fits nb_wino_fits_f64
#define nb_wino_forward nb_wino_forward_f64
#define nb_wino_scratch nb_wino_scratch_f64
#else
#undef nb_adam_step
#undef nb_adam_step_layout
#undef nb_batchnorm_backward
#undef nb_batchnorm_backward_set
#undef nb_batchnorm_forward
#undef nb_clip_global
#undef nb_clip_per_tensor
#undef nb_cnn
#undef nb_cnn_backward
#undef nb_cnn_data_init
#undef nb_cnn_exact_grads
#undef nb_cnn_flops
#undef nb_cnn_forward
#undef nb_cnn_free
#undef nb_cnn_grads_finish
#undef nb_cnn_init
#undef nb_cnn_layer
#undef nb_cnn_zero_grad
#undef nb_col_sums
#undef nb_conv2d_backward
#undef nb_conv2d_backward_prec
#undef nb_conv2d_forward
#undef nb_conv2d_forward_prec
#undef nb_conv2d_scratch
#undef nb_dense_backward
#undef nb_dense_forward
#undef nb_draw
#undef nb_draw_backward
#undef nb_draw_bce_backward
#undef nb_draw_bce_forward
#undef nb_draw_filterbank_backward
#undef nb_draw_filterbank_forward
#undef nb_draw_forward
#undef nb_draw_free
#undef nb_draw_generate
#undef nb_draw_init
#undef nb_draw_init_params
#undef nb_draw_latent_backward
#undef nb_draw_latent_forward
#undef nb_draw_read_backward
#undef nb_draw_read_forward
#undef nb_draw_write_backward
#undef nb_draw_write_forward
#undef nb_dropout_backward
#undef nb_dropout_forward
#undef nb_dropout_forward_at
#undef nb_dyt_backward
#undef nb_dyt_backward_set
#undef nb_dyt_forward
#undef nb_gap_backward
#undef nb_gap_forward
#undef nb_gauss_noise_forward
#undef nb_gauss_noise_forward_at
#undef nb_gpt
#undef nb_gpt_backward
#undef nb_gpt_decay
#undef nb_gpt_forward
#undef nb_gpt_free
#undef nb_gpt_init_params
#undef nb_gpt_logits
#undef nb_gpt_new
#undef nb_gpt_set_shard
#undef nb_gpt_step_flops
#undef nb_gru
#undef nb_gru_backward
#undef nb_gru_backward_seq
#undef nb_gru_begin
#undef nb_gru_finish_back
#undef nb_gru_forward
#undef nb_gru_free
#undef nb_gru_init_normal
#undef nb_gru_init_params
#undef nb_gru_input
#undef nb_gru_input_back
#undef nb_gru_last
#undef nb_gru_setup
#undef nb_gru_step
#undef nb_gru_step_back
#undef nb_l2abs_backward
#undef nb_l2abs_forward
#undef nb_l2norm
#undef nb_layernorm_backward
#undef nb_layernorm_backward_set
#undef nb_layernorm_forward
#undef nb_leaky_relu_backward
#undef nb_leaky_relu_forward
#undef nb_lstm
#undef nb_lstm_back_begin
#undef nb_lstm_backward
#undef nb_lstm_begin
#undef nb_lstm_dh
#undef nb_lstm_final
#undef nb_lstm_finish_back
#undef nb_lstm_forward
#undef nb_lstm_free
#undef nb_lstm_h
#undef nb_lstm_init
#undef nb_lstm_init_params
#undef nb_lstm_step
#undef nb_lstm_step_back
#undef nb_map_affine_backward
#undef nb_map_affine_forward
#undef nb_map_batchnorm_backward
#undef nb_map_batchnorm_forward
#undef nb_map_batchnorm_sync_backward
#undef nb_map_layernorm_backward
#undef nb_map_layernorm_forward
#undef nb_map_rmsnorm_backward
#undef nb_map_rmsnorm_forward
#undef nb_maxpool2_backward
#undef nb_maxpool2_forward
#undef nb_mlp
#undef nb_mlp_backward
#undef nb_mlp_data_init
#undef nb_mlp_forward
#undef nb_mlp_free
#undef nb_mlp_init
#undef nb_mlp_zero_grad
#undef nb_norm_ops
#undef nb_norm_ops_batch
#undef nb_norm_ops_dyt
#undef nb_norm_ops_layer
#undef nb_norm_ops_prms
#undef nb_norm_ops_rms
#undef nb_oe
#undef nb_oe_backward
#undef nb_oe_backward_embeddings
#undef nb_oe_encode_captions
#undef nb_oe_encode_images
#undef nb_oe_forward
#undef nb_oe_free
#undef nb_oe_init
#undef nb_order_errors
#undef nb_order_loss
#undef nb_order_loss_backward
#undef nb_orthogonal
#undef nb_reader
#undef nb_reader_backward
#undef nb_reader_forward
#undef nb_reader_free
#undef nb_reader_init
#undef nb_relu_backward
#undef nb_relu_forward
#undef nb_rmsnorm_backward
#undef nb_rmsnorm_backward_set
#undef nb_rmsnorm_forward
#undef nb_rnnsearch
#undef nb_rnnsearch_backward
#undef nb_rnnsearch_beam
#undef nb_rnnsearch_dec_init
#undef nb_rnnsearch_dec_step
#undef nb_rnnsearch_encode
#undef nb_rnnsearch_forward
#undef nb_rnnsearch_free
#undef nb_rnnsearch_greedy
#undef nb_rnnsearch_init
#undef nb_rs_dense
#undef nb_rs_norm
#undef nb_sigmoid_backward
#undef nb_sigmoid_forward
#undef nb_softmax_xent_backward
#undef nb_softmax_xent_backward_over
#undef nb_softmax_xent_forward
#undef nb_tanh_backward
#undef nb_tanh_forward
#undef nb_tf
#undef nb_tf_backward
#undef nb_tf_config
#undef nb_tf_forward
#undef nb_tf_free
#undef nb_tf_gemm_shapes
#undef nb_tf_incremental_logprobs
#undef nb_tf_init_params
#undef nb_tf_logits
#undef nb_tf_new
#undef nb_tf_set_shard
#undef nb_tf_step_flops
#undef nb_tf_tensors
#undef nb_tf_translate
#undef nb_weightnorm_backward
#undef nb_weightnorm_forward
#undef nb_wino_backward
#undef nb_wino_fits
#undef nb_wino_forward
#undef nb_wino_scratch
#endif
